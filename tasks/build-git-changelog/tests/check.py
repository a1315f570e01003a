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

ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
           GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")


def git(repo, *args):
    import subprocess
    subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, env=ENV)


def repo_with(subjects):
    d = tempfile.mkdtemp()
    git(d, "init", "-q", "-b", "main")
    for i, s in enumerate(subjects):
        git(d, "commit", "-q", "--allow-empty", "-m", s, "--date", f"2024-01-0{i + 1}T00:00:00")
    return d


@check
def lists_newest_first():
    d = repo_with(["first", "second", "third"])
    assert run("bash", "changelog.sh", d).stdout.splitlines() == ["- third", "- second", "- first"]


@check
def drops_wip():
    d = repo_with(["add parser", "WIP try", "wip: more", "fix parser"])
    assert run("bash", "changelog.sh", d).stdout.splitlines() == ["- fix parser", "- add parser"]


@check
def skips_merges():
    d = repo_with(["base"])
    git(d, "checkout", "-q", "-b", "side")
    git(d, "commit", "-q", "--allow-empty", "-m", "side work")
    git(d, "checkout", "-q", "main")
    git(d, "commit", "-q", "--allow-empty", "-m", "main work")
    git(d, "merge", "-q", "--no-ff", "-m", "Merge side", "side")
    out = run("bash", "changelog.sh", d).stdout.splitlines()
    assert "- Merge side" not in out and sorted(out) == ["- base", "- main work", "- side work"]


finish(all_or_nothing=False)
