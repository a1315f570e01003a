"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_exists(self):
        assert os.path.isfile("add.py")

    def test_importable(self):
        assert callable(load("add").add)

    def test_small_ints(self):
        assert load("add").add(2, 3) == 5

    def test_negative(self):
        assert load("add").add(-4, 1) == -3

    def test_floats(self):
        assert load("add").add(1.5, 2.25) == 3.75
