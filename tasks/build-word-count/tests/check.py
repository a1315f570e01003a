"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import json
import unittest

from checklib import load, run


class Checks(unittest.TestCase):
    def test_empty(self):
        assert load("wordcount").count("") == {"lines": 0, "words": 0, "chars": 0}

    def test_simple(self):
        assert load("wordcount").count("a b\nc\n") == {"lines": 2, "words": 3, "chars": 6}

    def test_whitespace_runs(self):
        assert load("wordcount").count("  x \t y  ") == {"lines": 0, "words": 2, "chars": 9}

    def test_unicode_chars(self):
        assert load("wordcount").count("héllo wörld\n")["chars"] == 12

    def test_cli(self):
        r = run("python3", "wordcount.py", "sample.txt")
        assert json.loads(r.stdout) == {"lines": 3, "words": 9, "chars": 44}
