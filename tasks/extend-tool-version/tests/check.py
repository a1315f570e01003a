"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import run


def tool(*args):
    return run("bash", "tool.sh", *args)


class Checks(unittest.TestCase):
    def test_prints_version(self):
        assert tool("version").stdout.strip() == "tool 1.2.0"

    def test_exits_zero(self):
        assert tool("version").returncode == 0

    def test_hello_kept(self):
        assert tool("hello").stdout.strip() == "hello there"
        assert tool("version").returncode == 0

    def test_unknown_kept(self):
        assert tool("nope").returncode == 1
        assert tool("version").returncode == 0
