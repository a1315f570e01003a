"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_added(self):
        assert "cherry" in read("fruits.txt").split()

    def test_kept(self):
        assert read("fruits.txt").split() == ["apple", "banana", "cherry"]
