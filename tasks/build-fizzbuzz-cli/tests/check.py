"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import run


def out(n):
    r = run("python3", "fizzbuzz.py", str(n))
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


class Checks(unittest.TestCase):
    def test_one(self):
        assert out(1) == ["1"]

    def test_fifteen(self):
        assert out(15) == "1 2 Fizz 4 Buzz Fizz 7 8 Fizz Buzz 11 Fizz 13 14 FizzBuzz".split()

    def test_thirty_three(self):
        assert out(33)[29:] == ["FizzBuzz", "31", "32", "Fizz"]

    def test_usage(self):
        r = run("python3", "fizzbuzz.py", "many")
        assert r.returncode == 2 and "usage" in r.stderr.lower() and not r.stdout.strip()
