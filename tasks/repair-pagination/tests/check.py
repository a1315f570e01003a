"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_first_page(self):
        assert load("pagination").page(list(range(10)), 1, 3) == [0, 1, 2]

    def test_last_page(self):
        assert load("pagination").page(list(range(10)), 4, 3) == [9]

    def test_past_the_end(self):
        assert load("pagination").page(list(range(10)), 5, 3) == []

    def test_still_validates(self):
        try:
            load("pagination").page([1], 0, 3)
        except ValueError:
            return
        raise AssertionError("no ValueError")
