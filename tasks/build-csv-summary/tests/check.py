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
import tempfile


def summary(text):
    fd, path = tempfile.mkstemp(suffix=".csv")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    r = run("python3", "summarize.py", path)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()


@check
def given_file():
    r = run("python3", "summarize.py", "sales.csv")
    assert r.stdout.strip().splitlines() == ["east 1 0.50", "north 12 7.50", "south 4 5.00"]


@check
def hidden_file():
    text = "region,product,units,price\nwest,a,3,2.10\nwest,b,1,0.05\nalpha,c,0,9\n"
    assert summary(text) == ["alpha 0 0.00", "west 4 6.35"]


@check
def quoted_fields():
    text = 'region,product,units,price\n"north","apple, red",2,1.5\n'
    assert summary(text) == ["north 2 3.00"]


finish(all_or_nothing=False)
