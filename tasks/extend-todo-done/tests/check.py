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

import os


def todo(*args):
    return run("python3", "todo.py", *args)


def fresh():
    if os.path.exists("todo.json"):
        os.remove("todo.json")
    todo("add", "buy milk")
    todo("add", "write report")


@check
def marks_done():
    fresh()
    r = todo("done", "2")
    assert r.returncode == 0, r.stderr
    assert todo("list").stdout.splitlines() == ["1. [ ] buy milk", "2. [x] write report"]


@check
def unknown_item():
    fresh()
    r = todo("done", "7")
    assert r.returncode == 1 and "no item 7" in r.stderr


@check
def old_file_format():
    with open("todo.json", "w") as f:
        f.write('[{"text": "legacy"}]')
    todo("done", "1")
    assert todo("list").stdout.splitlines() == ["1. [x] legacy"]


finish(all_or_nothing=False)
