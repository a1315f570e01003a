"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load, read


class Checks(unittest.TestCase):
    def test_limit(self):
        assert load("app").LIMIT == 20

    def test_rest_kept(self):
        app = load("app")
        assert app.LIMIT == 20 and app.clamp(25) == 20 and app.clamp(3) == 3
