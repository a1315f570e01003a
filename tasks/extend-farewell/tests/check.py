"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_says_goodbye(self):
        assert load("messages").goodbye("Ada").startswith("Goodbye, Ada")

    def test_ada(self):
        assert load("messages").goodbye("Ada") == "Goodbye, Ada!"

    def test_sam(self):
        assert load("messages").goodbye("Sam") == "Goodbye, Sam!"

    def test_hello_kept(self):
        m = load("messages")
        assert m.hello("Bo") + m.goodbye("Bo") == "Hello, Bo!Goodbye, Bo!"
