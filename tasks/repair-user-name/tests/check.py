"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_name(self):
        assert "Alice" in read("user.txt")

    def test_exact(self):
        assert read("user.txt").strip() == "name=Alice"
