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

def calc(expr):
    return run("python3", "calc.py", expr)


@check
def power():
    assert calc("2 ^ 10").stdout.strip() == "1024"


@check
def remainder():
    assert calc("17 % 5").stdout.strip() == "2"


@check
def remainder_by_zero():
    r = calc("4 % 0")
    assert r.returncode == 1 and "division by zero" in r.stderr and r.stdout == ""


@check
def power_fraction():
    assert calc("9 ^ 0.5").stdout.strip() == "3"


finish(all_or_nothing=False)
