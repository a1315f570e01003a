"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_exists(self):
        assert os.path.isfile("colors.txt")

    def test_first_line(self):
        assert read("colors.txt").splitlines()[0].strip() == "red"

    def test_both_lines(self):
        assert [line.strip() for line in read("colors.txt").strip().splitlines()] == ["red", "blue"]
