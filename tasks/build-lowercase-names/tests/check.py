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


def folder(names):
    d = tempfile.mkdtemp()
    for name in names:
        with open(os.path.join(d, name), "w") as f:
            f.write(name)
    return d


@check
def renames():
    d = folder(["A.TXT", "MixedCase.Md"])
    r = run("bash", "lower.sh", d)
    assert r.returncode == 0 and sorted(os.listdir(d)) == ["a.txt", "mixedcase.md"]
    assert open(os.path.join(d, "a.txt")).read() == "A.TXT"


@check
def spaces():
    d = folder(["My File.TXT"])
    run("bash", "lower.sh", d)
    assert os.listdir(d) == ["my file.txt"]


@check
def conflict():
    d = folder(["x.txt", "X.TXT"])
    r = run("bash", "lower.sh", d)
    assert sorted(os.listdir(d)) == ["X.TXT", "x.txt"] and "skip: X.TXT" in r.stderr


@check
def no_recursion():
    d = folder(["Top.TXT"])
    os.mkdir(os.path.join(d, "Sub"))
    open(os.path.join(d, "Sub", "Inner.TXT"), "w").close()
    run("bash", "lower.sh", d)
    assert sorted(os.listdir(d)) == ["Sub", "top.txt"] and os.listdir(os.path.join(d, "Sub")) == ["Inner.TXT"]


finish(all_or_nothing=False)
