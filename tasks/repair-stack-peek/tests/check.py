"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import unittest

from checklib import load


class Checks(unittest.TestCase):
    def test_lifo_and_len(self):
        m = load("stack")
        s = m.Stack()
        for i in (1, 2, 3):
            s.push(i)
        assert s.peek() == 3 and s.pop() == 3 and len(s) == 2 and s.peek() == 2

    def test_empty_pop(self):
        m = load("stack")
        try:
            m.Stack().pop()
        except m.EmptyStack:
            return
        raise AssertionError("no EmptyStack")

    def test_empty_peek(self):
        m = load("stack")
        try:
            m.Stack().peek()
        except m.EmptyStack:
            return
        raise AssertionError("no EmptyStack")
