"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_small(self):
        r = load("roman")
        assert [r.to_roman(i) for i in (1, 4, 9, 14, 40)] == ["I", "IV", "IX", "XIV", "XL"]

    def test_large(self):
        assert load("roman").to_roman(1994) == "MCMXCIV" and load("roman").to_roman(3999) == "MMMCMXCIX"

    def test_parse(self):
        r = load("roman")
        assert r.from_roman("MCMXCIV") == 1994 and r.from_roman("XLII") == 42

    def test_round_trip(self):
        r = load("roman")
        assert all(r.from_roman(r.to_roman(i)) == i for i in range(1, 4000))

    def test_out_of_range(self):
        r = load("roman")
        for bad in (0, 4000, -5):
            try:
                r.to_roman(bad)
            except ValueError:
                continue
            raise AssertionError(f"no ValueError for {bad}")
