"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import json
import os
import unittest


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class Checks(unittest.TestCase):
    def test_exists(self):
        assert os.path.isfile("hosts.json")

    def test_host(self):
        assert json.loads(read("hosts.json"))["host"] == "db.local"
