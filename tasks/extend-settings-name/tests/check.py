"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load, read


class Checks(unittest.TestCase):
    def test_name(self):
        assert load("settings").NAME == "demo"

    def test_debug_kept(self):
        settings = load("settings")
        assert settings.NAME == "demo" and settings.DEBUG is False
