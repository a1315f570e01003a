"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_four(self):
        assert load("series").sum_to(4) == 10

    def test_one(self):
        assert load("series").sum_to(1) == 1

    def test_zero(self):
        assert load("series").sum_to(0) == 0

    def test_ten(self):
        assert load("series").sum_to(10) == 55
