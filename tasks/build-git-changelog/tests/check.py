"""Hidden checks, one unittest case each: tests/test.sh runs them in /app and writes the reward."""

import os
import subprocess
import tempfile
import unittest

from checklib import run


ENV = dict(
    os.environ,
    GIT_AUTHOR_NAME="t",
    GIT_AUTHOR_EMAIL="t@example.com",
    GIT_COMMITTER_NAME="t",
    GIT_COMMITTER_EMAIL="t@example.com",
)


def git(repo, *args):
    import subprocess

    subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, env=ENV)


def repo_with(subjects):
    d = tempfile.mkdtemp()
    git(d, "init", "-q", "-b", "main")
    for i, s in enumerate(subjects):
        git(d, "commit", "-q", "--allow-empty", "-m", s, "--date", f"2024-01-0{i + 1}T00:00:00")
    return d


class Checks(unittest.TestCase):
    def test_lists_newest_first(self):
        d = repo_with(["first", "second", "third"])
        assert run("bash", "changelog.sh", d).stdout.splitlines() == ["- third", "- second", "- first"]

    def test_drops_wip(self):
        d = repo_with(["add parser", "WIP try", "wip: more", "fix parser"])
        assert run("bash", "changelog.sh", d).stdout.splitlines() == ["- fix parser", "- add parser"]

    def test_skips_merges(self):
        d = repo_with(["base"])
        git(d, "checkout", "-q", "-b", "side")
        git(d, "commit", "-q", "--allow-empty", "-m", "side work")
        git(d, "checkout", "-q", "main")
        git(d, "commit", "-q", "--allow-empty", "-m", "main work")
        git(d, "merge", "-q", "--no-ff", "-m", "Merge side", "side")
        out = run("bash", "changelog.sh", d).stdout.splitlines()
        assert "- Merge side" not in out and sorted(out) == ["- base", "- main work", "- side work"]
