"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_exists(self):
        assert os.path.isfile("parity.py")

    def test_four(self):
        assert load("parity").is_even(4) is True

    def test_seven(self):
        assert load("parity").is_even(7) is False

    def test_zero(self):
        assert load("parity").is_even(0) is True

    def test_negative_odd(self):
        assert load("parity").is_even(-3) is False
