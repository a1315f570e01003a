"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load, run


class Checks(unittest.TestCase):
    def test_accents_and_punctuation(self):
        assert load("slug").slugify("  Café au lait!  ") == "cafe-au-lait"

    def test_hyphen_runs(self):
        assert load("slug").slugify("a -- b__c") == "a-b-c"

    def test_digits_kept(self):
        assert load("slug").slugify("Top 10 Tips (2024)") == "top-10-tips-2024"

    def test_only_symbols(self):
        assert load("slug").slugify("!!!") == ""

    def test_visible_test_still_there_and_passing(self):
        r = run("python3", "test_slug.py")
        assert r.returncode == 0 and "ok" in r.stdout
