"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import json
import os
import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_exists(self):
        assert os.path.isfile("config.json")

    def test_port(self):
        assert json.loads(read("config.json"))["port"] == 8080
