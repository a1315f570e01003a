"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_odd(self):
        assert load("stats").median([3, 1, 2]) == 2

    def test_even(self):
        assert load("stats").median([4, 1, 3, 2]) == 2.5

    def test_input_untouched(self):
        data = [5, 3, 9, 1]
        load("stats").median(data)
        assert data == [5, 3, 9, 1]

    def test_mean_still_works(self):
        assert load("stats").mean([1, 2, 3, 4]) == 2.5
