"""The worker stops when its service dies, so no orphan keeps training after a SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TRAINER_ROOT = Path(__file__).resolve().parents[1]

# A stand-in for the trainer service: starts a process that watches it, prints that pid, waits.
SERVICE = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=sys.stdout)
time.sleep(60)
"""
WATCHER = """
import os, time
from bridle_trainer.worker import exit_with_parent
exit_with_parent(os.getppid(), interval=0.05)
print(os.getpid(), flush=True)
time.sleep(60)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; it only waits for its (new) parent to reap it.
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_worker_exits_when_its_service_is_killed() -> None:
    env = {**os.environ, "PYTHONPATH": str(TRAINER_ROOT)}
    service = subprocess.Popen(
        [sys.executable, "-c", SERVICE, WATCHER], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert service.stdout is not None
        worker = int(service.stdout.readline())
        time.sleep(0.3)
        assert alive(worker), "the watcher must keep running while its service lives"
        service.send_signal(signal.SIGKILL)
        service.wait()
        deadline = time.monotonic() + 5
        while alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(worker), "the worker outlived its service"
    finally:
        service.kill()
