"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import json
import os
import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_exists(self):
        assert os.path.isfile("hosts.json")

    def test_host(self):
        assert json.loads(read("hosts.json"))["host"] == "db.local"
