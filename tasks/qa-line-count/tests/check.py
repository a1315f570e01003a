"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_answered(self):
        assert os.path.isfile("answer.txt")

    def test_correct(self):
        assert read("answer.txt").strip() == "6"
