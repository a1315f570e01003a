"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_eighteen(self):
        assert load("age").is_adult(18) is True

    def test_forty(self):
        assert load("age").is_adult(40) is True

    def test_seventeen(self):
        assert load("age").is_adult(17) is False

    def test_baby(self):
        assert load("age").is_adult(0) is False
