"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import tempfile
import unittest

from checklib import run


def folder(names):
    d = tempfile.mkdtemp()
    for name in names:
        with open(os.path.join(d, name), "w") as f:
            f.write(name)
    return d


class Checks(unittest.TestCase):
    def test_renames(self):
        d = folder(["A.TXT", "MixedCase.Md"])
        r = run("bash", "lower.sh", d)
        assert r.returncode == 0 and sorted(os.listdir(d)) == ["a.txt", "mixedcase.md"]
        assert open(os.path.join(d, "a.txt")).read() == "A.TXT"

    def test_spaces(self):
        d = folder(["My File.TXT"])
        run("bash", "lower.sh", d)
        assert os.listdir(d) == ["my file.txt"]

    def test_conflict(self):
        d = folder(["x.txt", "X.TXT"])
        r = run("bash", "lower.sh", d)
        assert sorted(os.listdir(d)) == ["X.TXT", "x.txt"] and "skip: X.TXT" in r.stderr

    def test_no_recursion(self):
        d = folder(["Top.TXT"])
        os.mkdir(os.path.join(d, "Sub"))
        open(os.path.join(d, "Sub", "Inner.TXT"), "w").close()
        run("bash", "lower.sh", d)
        assert sorted(os.listdir(d)) == ["Sub", "top.txt"] and os.listdir(os.path.join(d, "Sub")) == [
            "Inner.TXT"
        ]
