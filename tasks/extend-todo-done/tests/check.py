"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import unittest

from checklib import run


def todo(*args):
    return run("python3", "todo.py", *args)


def fresh():
    if os.path.exists("todo.json"):
        os.remove("todo.json")
    todo("add", "buy milk")
    todo("add", "write report")


class Checks(unittest.TestCase):
    def test_marks_done(self):
        fresh()
        r = todo("done", "2")
        assert r.returncode == 0, r.stderr
        assert todo("list").stdout.splitlines() == ["1. [ ] buy milk", "2. [x] write report"]

    def test_unknown_item(self):
        fresh()
        r = todo("done", "7")
        assert r.returncode == 1 and "no item 7" in r.stderr

    def test_old_file_format(self):
        with open("todo.json", "w") as f:
            f.write('[{"text": "legacy"}]')
        todo("done", "1")
        assert todo("list").stdout.splitlines() == ["1. [x] legacy"]
