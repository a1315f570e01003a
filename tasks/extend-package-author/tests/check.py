"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import json
import unittest

from checklib import read


class Checks(unittest.TestCase):
    def test_author(self):
        assert json.loads(read("package.json"))["author"] == "sam"

    def test_name_kept(self):
        assert json.loads(read("package.json")) == {"name": "tool", "author": "sam"}
