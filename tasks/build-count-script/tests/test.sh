#!/usr/bin/env bash
# Runs the hidden checks (check.py: one unittest case per check, its helpers from checklib below)
# in /app and writes the reward:
# the share of checks that pass.
# If the checks crash (or the code under test kills them), the reward is 0.
mkdir -p /logs/verifier
rm -f /logs/verifier/reward.txt
cd /app
ALL_OR_NOTHING=0 python3 - <<'PY'
import importlib, os, subprocess, sys, types, unittest

sys.path.insert(0, "/app")


# The checks' helpers, defined once here for every check.py: `from checklib import read, load, run`.
def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def load(name):
    """The module `name` of /app, imported afresh."""
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def run(*cmd, stdin=None):
    return subprocess.run(cmd, capture_output=True, text=True, input=stdin, timeout=20)


checklib = types.ModuleType("checklib")
checklib.read, checklib.load, checklib.run = read, load, run
sys.modules["checklib"] = checklib
suite = unittest.defaultTestLoader.discover("/tests", pattern="check.py")
result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
passed = result.testsRun - len(result.failures) - len(result.errors)
if os.environ["ALL_OR_NOTHING"] == "1":
    score = 1.0 if result.wasSuccessful() and result.testsRun > 0 else 0.0
else:
    score = passed / result.testsRun if result.testsRun else 0.0
with open("/logs/verifier/reward.txt", "w") as f:
    f.write(f"{score}\n")
print(f"{passed}/{result.testsRun} checks passed; reward {score}")
PY
[ -f /logs/verifier/reward.txt ] || echo 0 > /logs/verifier/reward.txt
