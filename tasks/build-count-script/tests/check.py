"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import unittest

from checklib import run


def out():
    r = run("bash", "count.sh")
    assert r.returncode == 0, r.stderr
    return r.stdout


class Checks(unittest.TestCase):
    def test_exists(self):
        assert os.path.isfile("count.sh")

    def test_runs(self):
        assert out().strip() != ""

    def test_starts_at_one(self):
        assert out().split()[0] == "1"

    def test_one_to_five(self):
        assert out().split() == ["1", "2", "3", "4", "5"]

    def test_one_per_line(self):
        assert [line.strip() for line in out().strip().splitlines()] == ["1", "2", "3", "4", "5"]
