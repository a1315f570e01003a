"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import importlib
import sys
import unittest


def load(name):
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class Checks(unittest.TestCase):
    def test_name(self):
        assert load("settings").NAME == "demo"

    def test_debug_kept(self):
        settings = load("settings")
        assert settings.NAME == "demo" and settings.DEBUG is False
