"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_count(self):
        assert "3" in read("retry.txt")

    def test_exact(self):
        assert read("retry.txt").strip() == "retries=3"
