"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import importlib
import os
import sys
import unittest


def load(name):
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class Checks(unittest.TestCase):
    def test_exists(self):
        assert os.path.isfile("settings.py")

    def test_debug_is_true(self):
        assert load("settings").DEBUG is True
