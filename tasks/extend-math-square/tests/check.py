"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_three(self):
        assert load("arith").square(3) == 9

    def test_negative(self):
        assert load("arith").square(-4) == 16

    def test_zero(self):
        assert load("arith").square(0) == 0

    def test_others_kept(self):
        m = load("arith")
        assert m.double(m.square(2)) == 8 and m.half(m.square(2)) == 2
