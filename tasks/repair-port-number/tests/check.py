"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_port(self):
        assert "8080" in read("server.txt")

    def test_exact(self):
        assert read("server.txt").strip() == "port=8080"
