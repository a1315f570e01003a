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

@check
def small():
    r = load("roman")
    assert [r.to_roman(i) for i in (1, 4, 9, 14, 40)] == ["I", "IV", "IX", "XIV", "XL"]


@check
def large():
    assert load("roman").to_roman(1994) == "MCMXCIV" and load("roman").to_roman(3999) == "MMMCMXCIX"


@check
def parse():
    r = load("roman")
    assert r.from_roman("MCMXCIV") == 1994 and r.from_roman("XLII") == 42


@check
def round_trip():
    r = load("roman")
    assert all(r.from_roman(r.to_roman(i)) == i for i in range(1, 4000))


@check
def out_of_range():
    r = load("roman")
    for bad in (0, 4000, -5):
        try:
            r.to_roman(bad)
        except ValueError:
            continue
        raise AssertionError(f"no ValueError for {bad}")


finish(all_or_nothing=False)
