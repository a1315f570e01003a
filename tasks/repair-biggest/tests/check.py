"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_example(self):
        assert load("biggest").biggest([3, 9, 4]) == 9

    def test_negatives(self):
        assert load("biggest").biggest([-5, -2, -8]) == -2

    def test_single(self):
        assert load("biggest").biggest([7]) == 7

    def test_first_is_largest(self):
        assert load("biggest").biggest([6, 1, 0]) == 6
