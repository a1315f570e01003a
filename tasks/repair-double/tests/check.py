"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_three(self):
        assert load("calc").double(3) == 6

    def test_zero(self):
        assert load("calc").double(0) == 0

    def test_negative(self):
        assert load("calc").double(-4) == -8

    def test_triple_kept(self):
        assert load("calc").triple(2) == 6
