"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import run


def inv(*args):
    r = run("python3", "inventory.py", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


class Checks(unittest.TestCase):
    def test_csv_format(self):
        assert inv("--format", "csv") == ["name,quantity", '"bolt, small",120', "gear,0", "widget,4"]

    def test_min_filter(self):
        assert inv("--min", "4") == ["bolt, small: 120", "widget: 4"]

    def test_both(self):
        assert inv("--format", "csv", "--min", "5") == ["name,quantity", '"bolt, small",120']
