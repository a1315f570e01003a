"""Hidden checks: runs each check and writes the reward to /logs/verifier/reward.txt."""
import importlib
import os
import subprocess
import sys

sys.path.insert(0, "/app")
os.chdir("/app")
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def run(*cmd, stdin=None):
    return subprocess.run(cmd, capture_output=True, text=True, input=stdin, timeout=20)


def load(name):
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def finish(all_or_nothing):
    passed = 0
    for fn in CHECKS:
        try:
            fn()
            passed += 1
            print("PASS", fn.__name__)
        except Exception as e:  # a failure of the code under test is a failed check
            print("FAIL", fn.__name__, type(e).__name__, e)
    if all_or_nothing:
        score = 1.0 if passed == len(CHECKS) else 0.0
    else:
        score = passed / len(CHECKS)
    with open("/logs/verifier/reward.txt", "w") as f:
        f.write(f"{score}\n")
    print(f"{passed}/{len(CHECKS)} checks passed; reward {score}")

import json


@check
def empty():
    assert load("wordcount").count("") == {"lines": 0, "words": 0, "chars": 0}


@check
def simple():
    assert load("wordcount").count("a b\nc\n") == {"lines": 2, "words": 3, "chars": 6}


@check
def whitespace_runs():
    assert load("wordcount").count("  x \t y  ") == {"lines": 0, "words": 2, "chars": 9}


@check
def unicode_chars():
    assert load("wordcount").count("héllo wörld\n")["chars"] == 12


@check
def cli():
    r = run("python3", "wordcount.py", "sample.txt")
    assert json.loads(r.stdout) == {"lines": 3, "words": 9, "chars": 44}


finish(all_or_nothing=False)
