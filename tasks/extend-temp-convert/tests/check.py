"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


def close(a, b):
    return abs(a - b) < 1e-9


class Checks(unittest.TestCase):
    def test_freezing(self):
        assert close(load("convert").f_to_c(32), 0)

    def test_boiling(self):
        assert close(load("convert").f_to_c(212), 100)

    def test_minus_forty(self):
        assert close(load("convert").f_to_c(-40), -40)

    def test_fractional(self):
        assert close(load("convert").f_to_c(100), 340 / 9)

    def test_round_trip(self):
        m = load("convert")
        assert close(m.c_to_f(m.f_to_c(50)), 50)
