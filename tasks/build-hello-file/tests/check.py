"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import unittest


def text():
    with open("hello.txt", encoding="utf-8") as f:
        return f.read()


class Checks(unittest.TestCase):
    def test_exists(self):
        assert os.path.isfile("hello.txt")

    def test_first_line(self):
        assert text().splitlines()[0].strip() == "Hello, world!"

    def test_exact(self):
        assert text() in ("Hello, world!", "Hello, world!\n")
