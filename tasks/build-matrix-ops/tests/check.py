"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_transpose(self):
        assert load("matrix").transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]

    def test_multiply(self):
        assert load("matrix").multiply([[1, 2], [3, 4]], [[5, 6], [7, 8]]) == [[19, 22], [43, 50]]

    def test_identity(self):
        m = load("matrix")
        assert m.identity(3) == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
        assert m.multiply(m.identity(2), [[2, 3], [4, 5]]) == [[2, 3], [4, 5]]

    def test_bad_shapes(self):
        try:
            load("matrix").multiply([[1, 2]], [[1, 2]])
        except ValueError:
            return
        raise AssertionError("no ValueError")
