"""Durable step records: one directory per (run, step), written whole or not at all.

A step directory is built under a temporary name, every file and the directory are fsynced, and
only then is it renamed into place. The rename is the commit: a step directory that exists holds
a complete adapter, the optimiser state and `result.json`; a crash before it leaves only a
temporary directory, which the next start removes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def normalise_adapter_config(adapter_dir: Path) -> None:
    """PEFT writes `target_modules` from a set, in an order that changes between processes; sorting
    it makes equal adapters byte-identical, so their hashes agree."""
    path = adapter_dir / "adapter_config.json"
    config = json.loads(path.read_text())
    if isinstance(config.get("target_modules"), list):
        config["target_modules"] = sorted(config["target_modules"])
    path.write_text(json.dumps(config, indent=2, sort_keys=True))


def adapter_hash(adapter_dir: Path) -> str:
    """sha256 over the adapter's files in a fixed order (name, NUL, bytes, NUL), as serving computes it."""
    digest = hashlib.sha256()
    for name in ADAPTER_FILES:
        digest.update(name.encode() + b"\0")
        digest.update((adapter_dir / name).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


class StepStore:
    """Step records under `<root>/runs/<run>/steps/<step>/`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def run_dir(self, run: str) -> Path:
        return self.root / "runs" / run

    def step_dir(self, run: str, step: int) -> Path:
        return self.run_dir(run) / "steps" / f"{step:08d}"

    def result(self, run: str, step: int) -> dict[str, Any] | None:
        """The committed result of a step, or None when the step has not completed."""
        path = self.step_dir(run, step) / "result.json"
        if not path.exists():
            return None
        return json.loads(path.read_text())

    def clean_partial(self) -> int:
        """Removes temporary directories that a crash left behind; returns how many."""
        removed = 0
        for tmp in (self.root / "runs").glob("*/steps/.tmp-*"):
            shutil.rmtree(tmp, ignore_errors=True)
            removed += 1
        return removed

    def commit(self, run: str, step: int, write: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
        """Builds the step directory with `write(tmp)` (which returns the result), then commits it."""
        final = self.step_dir(run, step)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".tmp-{step:08d}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            result = write(tmp)
            (tmp / "result.json").write_text(json.dumps(result, sort_keys=True))
            for path in sorted(tmp.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                _fsync_path(path)
            _fsync_path(tmp)
            os.rename(tmp, final)
            _fsync_path(final.parent)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return result
