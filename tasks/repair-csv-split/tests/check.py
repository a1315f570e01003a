"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_plain(self):
        assert load("csvline").split_line("a,b,c") == ["a", "b", "c"]

    def test_quoted_comma(self):
        assert load("csvline").split_line('1,"x, y",2') == ["1", "x, y", "2"]

    def test_doubled_quotes(self):
        q = chr(34)  # a double quote
        assert load("csvline").split_line(q + "say " + 2 * q + "hi" + 3 * q + ",z") == [
            "say " + q + "hi" + q,
            "z",
        ]

    def test_empty_fields(self):
        assert load("csvline").split_line(',,""') == ["", "", ""]

    def test_no_csv_module(self):
        assert "import csv" not in open("/app/csvline.py").read()
