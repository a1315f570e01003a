"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import run


def calc(expr):
    return run("python3", "calc.py", expr)


class Checks(unittest.TestCase):
    def test_power(self):
        assert calc("2 ^ 10").stdout.strip() == "1024"

    def test_remainder(self):
        assert calc("17 % 5").stdout.strip() == "2"

    def test_remainder_by_zero(self):
        r = calc("4 % 0")
        assert r.returncode == 1 and "division by zero" in r.stderr and r.stdout == ""

    def test_power_fraction(self):
        assert calc("9 ^ 0.5").stdout.strip() == "3"
