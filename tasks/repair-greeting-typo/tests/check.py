"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_spelled(self):
        assert "Helo," not in read("greeting.txt") and "Hello" in read("greeting.txt")

    def test_exact(self):
        assert read("greeting.txt").strip() == "Hello, world!"
