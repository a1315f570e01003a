"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_exists(self):
        assert os.path.isfile("greeting.py")

    def test_bob(self):
        assert load("greeting").greet("Bob") == "Hello, Bob!"

    def test_two_words(self):
        assert load("greeting").greet("Mia Wong") == "Hello, Mia Wong!"

    def test_accented(self):
        assert load("greeting").greet("Zoë") == "Hello, Zoë!"
