"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_added(self):
        assert "blue" in read("colors.txt").split()

    def test_kept(self):
        assert read("colors.txt").split() == ["red", "green", "blue"]
