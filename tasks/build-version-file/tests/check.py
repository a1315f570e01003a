"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_exists(self):
        assert os.path.isfile("VERSION")

    def test_content(self):
        assert read("VERSION").strip() == "2.4.1"
