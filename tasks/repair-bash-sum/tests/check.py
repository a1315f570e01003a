"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import tempfile
import unittest

from checklib import run


def total(text):
    f = tempfile.NamedTemporaryFile("w", delete=False, suffix=".txt")
    f.write(text)
    f.close()
    r = run("bash", "sum.sh", f.name)
    return r.stdout.strip()


class Checks(unittest.TestCase):
    def test_no_final_newline(self):
        assert total("1\n2\n3") == "6"

    def test_blank_lines(self):
        assert total("4\n\n5\n\n") == "9"

    def test_negatives(self):
        assert total("10\n-3\n") == "7"

    def test_empty(self):
        assert total("") == "0"
