"""The resident worker: JSON lines on stdin (requests) and stdout (events), logs on stderr.

Protocol, one JSON object per line:
  worker -> {"type": "ready", "device", "vocabSize", "maxTokens"} once the model is loaded
  service -> {"id", "op": "step", "request": {run, step, config, trajectories, batchHash?}}
  worker -> {"type": "progress", "id", "phase", "done", "total"} while a step runs
  worker -> {"type": "result", "id", "result"} or {"type": "error", "id", "error": {status, code, message}}
Requests are handled one at a time, in order.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import logging
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

from .errors import StepError
from .trainer import Trainer

log = logging.getLogger("bridle_trainer")


def _malloc_trim() -> Any:
    """glibc's malloc_trim, or None where the C library has none (musl, macOS)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


def release_memory() -> None:
    """Hands a finished step's freed memory back to the system. The allocator keeps what a step's
    activations freed: the 0.5B's worker at fp32 stayed at 5.5 GB between steps (2.7 GB loaded),
    memory the model server and the harnesses beside it on the same machine then lack."""
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)


class Channel:
    """Writes protocol events to the real stdout; everything else printed goes to stderr."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def send(self, event: dict[str, Any]) -> None:
        self.out.write(json.dumps(event, allow_nan=False) + "\n")
        self.out.flush()


def handle(trainer: Trainer, channel: Channel, message: dict[str, Any]) -> None:
    request_id = message.get("id")
    try:
        if message.get("op") != "step":
            raise StepError(400, "unknown_op", f"unknown op {message.get('op')!r}")

        def progress(phase: str, done: int, total: int) -> None:
            channel.send({"type": "progress", "id": request_id, "phase": phase, "done": done, "total": total})

        result = trainer.step(message.get("request"), progress)
        channel.send({"type": "result", "id": request_id, "result": result})
    except StepError as err:
        channel.send({"type": "error", "id": request_id, "error": err.to_json()})
    except Exception as err:
        log.error("step failed: %s", traceback.format_exc())
        channel.send(
            {
                "type": "error",
                "id": request_id,
                "error": {"status": 500, "code": "trainer_failed", "message": f"{type(err).__name__}: {err}"},
            }
        )
    finally:
        release_memory()


def exit_with_parent(parent: int, interval: float = 0.5) -> threading.Thread:
    """Stops this process as soon as the service that started it is gone, even when it was SIGKILLed
    in the middle of a step: nobody would collect the result, and a restarted service starts a new
    worker that must not share the GPU and the run's files with an orphan. A step cut off here
    leaves no trace, since steps commit atomically."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        log.warning("the trainer service (pid %d) is gone; stopping", parent)
        os._exit(1)

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, type=Path, help="base model directory (HF safetensors)")
    parser.add_argument("--data", required=True, type=Path, help="where step records and adapters live")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda[:n]")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="matmul number format")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    exit_with_parent(os.getppid())
    channel = Channel(sys.stdout)
    sys.stdout = sys.stderr  # libraries that print must not corrupt the protocol
    trainer = Trainer(args.model, args.data, args.device, args.precision)
    channel.send(
        {
            "type": "ready",
            "device": trainer.device.type,
            "precision": args.precision,
            "vocabSize": trainer.vocab_size,
            "maxTokens": trainer.max_tokens,
        }
    )
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError as err:
            channel.send(
                {
                    "type": "error",
                    "id": None,
                    "error": {"status": 400, "code": "invalid_json", "message": str(err)},
                }
            )
            continue
        handle(trainer, channel, message)


if __name__ == "__main__":
    main()
