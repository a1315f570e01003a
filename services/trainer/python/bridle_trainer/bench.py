"""Training throughput: the trainer's whole GRPO step (validation and the atomic save included)
vs a plain PEFT forward/backward/optimiser loop on the same batch, in one process. Prints one JSON
object; `pnpm bench` in services/trainer shows it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, get_peft_model

from .batch import DEFAULT_TARGETS
from .grpo import token_logprobs
from .trainer import Trainer


def make_batch(size: int, prompt_len: int, completion_len: int, vocab: int) -> list[dict[str, Any]]:
    rng = random.Random(0)
    return [
        {
            "group": f"g{i // 4}",
            "reward": float(i % 2),
            "calls": [
                {
                    "promptTokenIds": [rng.randrange(vocab) for _ in range(prompt_len)],
                    "completionTokenIds": [rng.randrange(vocab) for _ in range(completion_len)],
                    "logprobs": [-1.0] * completion_len,
                }
            ],
        }
        for i in range(size)
    ]


def plain_loop(trainer: Trainer, trajectories: list[dict[str, Any]], iterations: int, lr: float) -> int:
    """A textbook PEFT loop on the same base model, sequences and number format (bf16 autocast when
    the trainer uses it); returns the tokens it processed."""
    base = trainer.lora.peft.unload() if trainer.lora.peft is not None else trainer.lora._base
    torch.manual_seed(0)
    lora = LoraConfig(
        r=8, lora_alpha=16, target_modules=list(DEFAULT_TARGETS), lora_dropout=0.0, task_type="CAUSAL_LM"
    )
    model = get_peft_model(base, lora)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    seqs = [c["promptTokenIds"] + c["completionTokenIds"] for t in trajectories for c in t["calls"]]
    ids = torch.tensor(seqs, device=trainer.device)
    adv = torch.tensor([t["reward"] - 0.5 for t in trajectories], device=trainer.device)
    for _ in range(iterations):
        optimizer.zero_grad()
        with trainer.precision():
            logits = model(input_ids=ids).logits
        logp = token_logprobs(logits.float(), ids)
        loss = -(logp.sum(-1) * adv).mean()
        loss.backward()
        optimizer.step()
    trainer.lora._base = model.unload()
    trainer.lora.peft = None
    trainer.lora._key = None
    return ids.numel() * iterations


def timed(work: Callable[[], int]) -> tuple[float, float]:
    """Tokens per wall-clock second and per CPU second (steadier on a shared machine)."""
    wall, cpu = time.perf_counter(), time.process_time()
    tokens = work()
    return tokens / (time.perf_counter() - wall), tokens / (time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=24)
    parser.add_argument("--completion-tokens", type=int, default=24)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        trainer = Trainer(args.model, Path(data), args.device, args.precision)
        trajectories = make_batch(args.batch, args.prompt_tokens, args.completion_tokens, trainer.vocab_size)
        config = {
            "learningRate": 1e-5,
            "iterations": args.iterations,
            "microBatchSize": args.batch,
            "clipEpsilon": 10,
        }
        runs = 0
        loop_rates: list[float] = []

        def ours() -> int:
            nonlocal runs
            runs += 1
            request = {"run": f"bench{runs}", "step": 1, "config": config, "trajectories": trajectories}
            result = trainer.step(request, lambda *_: None)
            loop_rates.append(result["tokensPerSecond"])  # the optimiser loop alone, as the plain one
            return int(result["tokens"])

        def plain() -> int:
            return plain_loop(trainer, trajectories, args.iterations, 1e-5)

        ours(), plain()  # warm-up: allocator and kernels
        figures: dict[str, list[tuple[float, float]]] = {"trainer": [], "plain": []}
        for _ in range(args.repeats):
            # Alternate the two so that a noisy neighbour on the machine hurts both alike.
            figures["trainer"].append(timed(ours))
            figures["plain"].append(timed(plain))
        median = {
            k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
            for k, v in figures.items()
        }
        print(
            json.dumps(
                {
                    "device": trainer.device.type,
                    "precision": args.precision,
                    "sequences": args.batch,
                    "tokensPerSequence": args.prompt_tokens + args.completion_tokens,
                    "iterations": args.iterations,
                    "repeats": args.repeats,
                    "trainerLoopTokensPerSecond": statistics.median(loop_rates[1:]),
                    "trainerTokensPerSecond": median["trainer"][0],
                    "plainTokensPerSecond": median["plain"][0],
                    "trainerTokensPerCpuSecond": median["trainer"][1],
                    "plainTokensPerCpuSecond": median["plain"][1],
                }
            )
        )


if __name__ == "__main__":
    main()
