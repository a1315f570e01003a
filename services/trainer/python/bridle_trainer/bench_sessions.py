"""Harness-shaped steps: a group of rollouts whose calls share a long prompt (a harness's system
prompt, tools and task) and grow turn by turn (the model's answer and a tool result each turn), so
most calls' own part after the shared prompt is longer than a micro-batch. The trainer's step
with those long suffixes run alone in windows, after the shared prompt, against the same step with
them on the plain path (each whole sequence, prompt included, with gradient checkpointing), as
the trainer ran them before. Each variant runs in a process of its own, so each peak memory is
its own; the loss must agree.

    pnpm bench:sessions [-- --prompt 3000 --turns 4 --answer 60 --tool 550 --rollouts 4
        --precision bf16]   (python -m bridle_trainer.bench_sessions --model DIR ...)
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def session_batch(args: argparse.Namespace, vocab: int) -> list[dict[str, Any]]:
    """`rollouts` rollouts of one task: the same prompt, then `turns` calls each, every call's
    prompt the previous one plus its answer and a tool result (the harness re-renders them, so
    calls do not chain into one sequence: each is its own)."""
    rng = random.Random(0)
    system = [rng.randrange(vocab) for _ in range(args.prompt)]
    out = []
    for i in range(args.rollouts):
        prompt, calls = list(system), []
        for _ in range(args.turns):
            answer = [rng.randrange(vocab) for _ in range(args.answer)]
            calls.append(
                {
                    "promptTokenIds": list(prompt),
                    "completionTokenIds": answer,
                    "logprobs": [-1.0] * args.answer,
                }
            )
            # A re-rendered answer and a tool result: the next prompt does not extend this call.
            prompt = prompt + [rng.randrange(vocab) for _ in range(args.answer + args.tool)]
        out.append({"group": "g0", "reward": float(i == 0), "calls": calls})
    return out


def variant(args: argparse.Namespace) -> dict[str, Any]:
    from . import prefix, trainer
    from .trainer import Trainer

    if args.variant == "plain":
        # The previous route: a long suffix leaves its group and runs whole on the plain path.
        def previous(
            items: list[prefix.Item], min_shared: int = 128, max_suffix: int = prefix.MAX_SUFFIX
        ) -> list[prefix.PrefixGroup]:
            groups = prefix.prefix_groups(items, min_shared, max_suffix)
            moved = [item for g in groups for item in g.long]
            for g in groups:
                g.long = []
            kept = [g for g in groups if len(g.items) > 1 or not g.shared]
            alone = [item for g in groups if len(g.items) == 1 and g.shared for item in g.items]
            plain = [g for g in kept if not g.shared]
            rest = [item for g in plain for item in g.items] + alone + moved
            return [g for g in kept if g.shared] + ([prefix.PrefixGroup(0, rest)] if rest else [])

        trainer.prefix_groups = previous
    with tempfile.TemporaryDirectory() as data:
        t = Trainer(Path(args.model), Path(data), "cpu", args.precision)
        request = {
            "run": "bench",
            "step": 1,
            "config": {"learningRate": 1e-5, "iterations": 1, "temperature": 1.0, "measureKl": True},
            "trajectories": session_batch(args, t.vocab_size),
        }
        started = time.perf_counter()
        result = t.step(request, lambda *_: None)
        seconds = time.perf_counter() - started
    return {
        "variant": args.variant,
        "seconds": round(seconds, 1),
        "tokens": result["tokens"],
        "sequenceTokens": result["sequenceTokens"],
        "prefixGroups": result["prefixGroups"],
        "loss": result["loss"],
        "peakGB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    parser.add_argument("--prompt", type=int, default=3000, help="shared prompt tokens")
    parser.add_argument("--turns", type=int, default=4, help="calls per rollout")
    parser.add_argument("--answer", type=int, default=60, help="generated tokens per call")
    parser.add_argument("--tool", type=int, default=550, help="tool-result tokens per turn")
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--variant", choices=["windows", "plain"], help=argparse.SUPPRESS)
    # pnpm passes a literal `--` before the script's own arguments.
    argv = [a for a in sys.argv[1:] if a != "--"]
    args = parser.parse_args(argv)
    if args.variant:
        print(json.dumps(variant(args)))
        return
    rows = {}
    for name in ("plain", "windows"):
        cmd = [sys.executable, "-m", "bridle_trainer.bench_sessions", *argv, "--variant", name]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"the {name} variant failed:\n{done.stderr[-2000:]}")
        rows[name] = json.loads(done.stdout.strip().splitlines()[-1])
    plain, windows = rows["plain"], rows["windows"]
    longest = args.turns * (args.answer + args.tool) - args.tool
    print(
        f"{args.rollouts} rollouts x {args.turns} calls, shared prompt {args.prompt} tokens, "
        f"own part up to {longest} tokens, {args.precision}"
    )
    print(f"{'':24}{'plain path (before)':>22}{'windows':>12}{'ratio':>10}")
    ratio = plain["seconds"] / windows["seconds"]
    print(f"{'step seconds':24}{plain['seconds']:>22}{windows['seconds']:>12}{ratio:>9.2f}x")
    print(f"{'tokens run':24}{plain['tokens']:>22}{windows['tokens']:>12}")
    print(f"{'peak memory GB':24}{plain['peakGB']:>22}{windows['peakGB']:>12}")
    print(f"{'loss':24}{plain['loss']:>22.6f}{windows['loss']:>12.6f}")
    print(json.dumps({"plain": plain, "windows": windows}))


if __name__ == "__main__":
    main()
