"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import tempfile
import unittest

from checklib import run


def summary(text):
    fd, path = tempfile.mkstemp(suffix=".csv")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    r = run("python3", "summarize.py", path)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()


class Checks(unittest.TestCase):
    def test_given_file(self):
        r = run("python3", "summarize.py", "sales.csv")
        assert r.stdout.strip().splitlines() == ["east 1 0.50", "north 12 7.50", "south 4 5.00"]

    def test_hidden_file(self):
        text = "region,product,units,price\nwest,a,3,2.10\nwest,b,1,0.05\nalpha,c,0,9\n"
        assert summary(text) == ["alpha 0 0.00", "west 4 6.35"]

    def test_quoted_fields(self):
        text = 'region,product,units,price\n"north","apple, red",2,1.5\n'
        assert summary(text) == ["north 2 3.00"]
