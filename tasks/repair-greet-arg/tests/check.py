"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import run


def greet(name):
    r = run("bash", "greet.sh", name)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


class Checks(unittest.TestCase):
    def test_sam(self):
        assert greet("Sam") == "Hello, Sam"

    def test_ada(self):
        assert greet("Ada") == "Hello, Ada"
