"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import read


def lines():
    return [line.strip() for line in read("list.txt").strip().splitlines()]


class Checks(unittest.TestCase):
    def test_has_cherry(self):
        assert "cherry" in lines()

    def test_cherry_last_others_kept(self):
        assert lines() == ["apple", "banana", "cherry"]
