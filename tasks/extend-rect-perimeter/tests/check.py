"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_two_by_three(self):
        assert load("rect").perimeter(2, 3) == 10

    def test_square(self):
        assert load("rect").perimeter(5, 5) == 20

    def test_flat(self):
        assert load("rect").perimeter(0, 4) == 8

    def test_area_kept(self):
        m = load("rect")
        assert m.area(2, 3) + m.perimeter(1, 1) == 10
