"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import json
import unittest


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class Checks(unittest.TestCase):
    def test_author(self):
        assert json.loads(read("package.json"))["author"] == "sam"

    def test_name_kept(self):
        assert json.loads(read("package.json")) == {"name": "tool", "author": "sam"}
