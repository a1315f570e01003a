"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import subprocess
import unittest


def run(*cmd, stdin=None):
    return subprocess.run(cmd, capture_output=True, text=True, input=stdin, timeout=20)


def greet(name):
    r = run("bash", "greet.sh", name)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


class Checks(unittest.TestCase):
    def test_sam(self):
        assert greet("Sam") == "Hello, Sam"

    def test_ada(self):
        assert greet("Ada") == "Hello, Ada"
