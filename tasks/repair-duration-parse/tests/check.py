"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_minutes(self):
        assert load("duration").parse_duration("1h30m") == 5400

    def test_all_parts(self):
        assert load("duration").parse_duration("1h30m15s") == 5415

    def test_seconds_only(self):
        assert load("duration").parse_duration("45s") == 45

    def test_rejects(self):
        d = load("duration")
        for bad in ("", "5", "1m1h", "abc"):
            try:
                d.parse_duration(bad)
            except ValueError:
                continue
            raise AssertionError(f"accepted {bad!r}")
