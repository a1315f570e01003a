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

def close(a, b):
    return abs(a - b) < 1e-9


@check
def freezing():
    assert close(load("convert").f_to_c(32), 0)


@check
def boiling():
    assert close(load("convert").f_to_c(212), 100)


@check
def minus_forty():
    assert close(load("convert").f_to_c(-40), -40)


@check
def fractional():
    assert close(load("convert").f_to_c(100), 340 / 9)


@check
def round_trip():
    m = load("convert")
    assert close(m.c_to_f(m.f_to_c(50)), 50)


finish(all_or_nothing=False)
