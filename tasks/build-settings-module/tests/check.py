"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import unittest

from checklib import load, read


class Checks(unittest.TestCase):
    def test_exists(self):
        assert os.path.isfile("settings.py")

    def test_debug_is_true(self):
        assert load("settings").DEBUG is True
