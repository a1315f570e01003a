"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_city(self):
        assert "London" in read("city.txt")

    def test_exact(self):
        assert read("city.txt").strip() == "city=London"
