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
def odd():
    assert load("stats").median([3, 1, 2]) == 2


@check
def even():
    assert load("stats").median([4, 1, 3, 2]) == 2.5


@check
def input_untouched():
    data = [5, 3, 9, 1]
    load("stats").median(data)
    assert data == [5, 3, 9, 1]


@check
def mean_still_works():
    assert load("stats").mean([1, 2, 3, 4]) == 2.5


finish(all_or_nothing=True)
