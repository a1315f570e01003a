"""Memory bandwidth of this machine, for the serving benchmark's decode ceiling.

A decode step of a small model must stream every weight from memory once, so read bandwidth over the
weights' bytes bounds single-stream tokens/s. Prints one JSON line: the best of a few timed passes of
a sum (one thread, and split over threads as vLLM's OpenMP threads would) and of a copy.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

GB = 1e9


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    """The fastest of `repeats` timed calls: noise on a shared machine only ever adds time."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=2.0, help="size of the array that is read")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    src = np.ones(int(args.gib * 2**30) // 4, dtype=np.float32)  # ones, not empty: pages are touched
    # The copy uses half the array so the run peaks at 1.5x its size, not 2x, beside a running stack.
    half = src[: src.size // 2]
    dst = np.zeros_like(half)
    chunks = np.array_split(src, args.threads)

    read_one = best_seconds(src.sum, args.repeats)
    # numpy releases the GIL inside its reductions, so threads read their chunks in parallel.
    with ThreadPoolExecutor(args.threads) as pool:
        read_all = best_seconds(lambda: list(pool.map(np.sum, chunks)), args.repeats)
    copy = best_seconds(lambda: np.copyto(dst, half), args.repeats)

    print(
        json.dumps(
            {
                "arrayBytes": src.nbytes,
                "threads": args.threads,
                "readOneThreadGBs": src.nbytes / read_one / GB,
                "readThreadsGBs": src.nbytes / read_all / GB,
                # Read plus write, the way copy bandwidth is usually quoted.
                "copyGBs": 2 * half.nbytes / copy / GB,
            }
        )
    )


if __name__ == "__main__":
    main()
