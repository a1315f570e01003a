"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import json
import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_version(self):
        assert json.loads(read("config.json"))["version"] == "1.0"

    def test_name_kept(self):
        assert json.loads(read("config.json")) == {"name": "demo", "version": "1.0"}
