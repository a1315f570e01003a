"""One GRPO step, exactly once per (run, step), on the model the worker keeps in memory."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from .batch import ModelCall, StepRequest, TrainConfig, validate_or_raise
from .errors import StepError
from .grpo import group_advantages, grpo_loss, token_logprobs
from .model import LoraModel, load_base, pick_device
from .store import StepStore, adapter_hash, normalise_adapter_config

Progress = Callable[[str, int, int], None]


def collate(calls: list[tuple[ModelCall, float]], device: torch.device) -> dict[str, torch.Tensor]:
    """Right-padded ids, attention mask, and per-position completion mask / sampling logprobs.

    Logprob position i scores token i + 1, so a completion starting at index P occupies P-1...
    Only positions from the earliest completion start on are kept (`first`): the model computes
    no logits for the rest of the prompts, which on an agent's long prompt is most of a step's
    memory and a good part of its time (a vocabulary-wide row per prompt token).
    """
    width = max(len(c.prompt_token_ids) + len(c.completion_token_ids) for c, _ in calls)
    first = min(len(c.prompt_token_ids) for c, _ in calls) - 1
    ids = torch.zeros(len(calls), width, dtype=torch.long)
    attention = torch.zeros(len(calls), width, dtype=torch.long)
    mask = torch.zeros(len(calls), width - 1 - first)
    old = torch.zeros(len(calls), width - 1 - first)
    for row, (call, _) in enumerate(calls):
        seq = call.prompt_token_ids + call.completion_token_ids
        ids[row, : len(seq)] = torch.tensor(seq)
        attention[row, : len(seq)] = 1
        start = len(call.prompt_token_ids) - 1 - first
        end = start + len(call.completion_token_ids)
        mask[row, start:end] = 1
        old[row, start:end] = torch.tensor(call.logprobs)
    advantages = torch.tensor([adv for _, adv in calls])
    tensors = {"ids": ids, "attention": attention, "mask": mask, "old": old, "advantages": advantages}
    return {**{k: v.to(device) for k, v in tensors.items()}, "first": torch.tensor(first)}


def completion_logprobs(
    model: torch.nn.Module, batch: dict[str, torch.Tensor], attention: torch.Tensor | None
) -> torch.Tensor:
    """Logprobs of the tokens after position `first` (aligned with the batch's mask and old logprobs)."""
    ids, first = batch["ids"], int(batch["first"])
    logits = model(input_ids=ids, attention_mask=attention, logits_to_keep=ids.shape[1] - first).logits
    return token_logprobs(logits, ids[:, first:])


def attention_or_none(batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """Without padding the mask is all ones: leaving it out lets attention take its faster causal path."""
    attention = batch["attention"]
    return None if bool(attention.all()) else attention


def optimizer_steps(optimizer: torch.optim.Optimizer) -> int:
    """How many updates this optimiser state has applied in total (Adam's own step counter)."""
    for state in optimizer.state.values():
        step = state.get("step")
        if step is not None:
            return int(step)
    return 0


class Trainer:
    """Holds the base model and the last committed step's adapter and optimiser state in memory."""

    def __init__(self, model_dir: Path, data_dir: Path, device: str = "auto") -> None:
        self.device = pick_device(device)
        base = load_base(model_dir, self.device)
        self.vocab_size = int(base.config.vocab_size)
        self.max_tokens = int(base.config.max_position_embeddings)
        self.lora = LoraModel(base, self.device)
        self.store = StepStore(data_dir)
        self.store.clean_partial()
        self.optimizer: torch.optim.Optimizer | None = None
        self._state_of: tuple[str, int] | None = None

    def step(self, raw: Any, progress: Progress) -> dict[str, Any]:
        """Runs a step, or returns its committed result if it already completed."""
        req = validate_or_raise(raw, self.vocab_size, self.max_tokens)
        done = self.store.result(req.run, req.step)
        if done is not None:
            if done["batchHash"] != req.batch_hash:
                raise StepError(
                    409, "step_conflict", f"step {req.step} of run {req.run} completed with a different batch"
                )
            return {**done, "replayed": True}
        if req.step > 1 and self.store.result(req.run, req.step - 1) is None:
            raise StepError(
                409,
                "previous_step_missing",
                f"step {req.step - 1} of run {req.run} has not completed; steps apply in order",
            )
        self._load_state(req)
        self._state_of = None  # memory is about to diverge from every committed state
        started = time.perf_counter()
        summary = self._train(req, progress)
        progress("save", 0, 1)
        final = self.store.step_dir(req.run, req.step)
        result = self.store.commit(
            req.run, req.step, lambda tmp: self._save(tmp, final, req, summary, started)
        )
        self._state_of = (req.run, req.step)
        return {**result, "replayed": False}

    def _load_state(self, req: StepRequest) -> None:
        config = req.config
        if self._state_of == (req.run, req.step - 1) and self.optimizer is not None:
            for group in self.optimizer.param_groups:
                group["lr"] = config.learning_rate
            return
        if req.step == 1:
            self.lora.fresh(config)
            self.optimizer = self._new_optimizer(config)
            return
        previous = self.store.step_dir(req.run, req.step - 1)
        saved = json.loads((previous / "adapter" / "adapter_config.json").read_text())
        shape = (saved["r"], float(saved["lora_alpha"]), tuple(sorted(saved["target_modules"])))
        if shape != config.lora_key():
            raise StepError(
                409, "lora_shape_changed", f"run {req.run} uses LoRA {shape}; the request asks for another"
            )
        self.lora.restore(config, previous / "adapter")
        self.optimizer = self._new_optimizer(config)
        self.optimizer.load_state_dict(torch.load(previous / "optimizer.pt", map_location=self.device))
        for group in self.optimizer.param_groups:
            group["lr"] = config.learning_rate

    def _new_optimizer(self, config: TrainConfig) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.lora.trainable(), lr=config.learning_rate, weight_decay=0.0)

    def _train(self, req: StepRequest, progress: Progress) -> dict[str, Any]:
        config, peft, optimizer = req.config, self.lora.peft, self.optimizer
        assert peft is not None and optimizer is not None
        advantages = group_advantages(req.trajectories, config.scale_by_std)
        calls = [(c, a) for t, a in zip(req.trajectories, advantages, strict=True) for c in t.calls]
        completion_tokens = sum(len(c.completion_token_ids) for c, _ in calls)
        base = {"completionTokens": completion_tokens, "calls": len(calls), "advantages": advantages}
        if all(a == 0 for a in advantages):
            return {
                **base,
                "applied": False,
                "noopReason": "zero_advantage",
                "loss": 0.0,
                "clipFraction": 0.0,
                "kl": 0.0,
                "tokens": 0,
                "trainSeconds": 0.0,
            }
        # Zero-advantage calls add nothing to the surrogate; they matter only for the KL term.
        used = calls if config.kl_coef > 0 else [(c, a) for c, a in calls if a != 0]
        chunks = [used[i : i + config.micro_batch_size] for i in range(0, len(used), config.micro_batch_size)]
        batches = [collate(chunk, self.device) for chunk in chunks]
        refs = self._reference_logprobs(batches) if config.kl_coef > 0 else [None] * len(batches)
        total, done, first_loss, clipped, kl_sum = config.iterations * len(batches), 0, 0.0, 0, 0.0
        peft.train()
        started = time.perf_counter()
        for iteration in range(config.iterations):
            optimizer.zero_grad(set_to_none=True)
            for batch, ref in zip(batches, refs, strict=True):
                new = completion_logprobs(peft, batch, attention_or_none(batch))
                parts = grpo_loss(
                    new,
                    batch["old"],
                    batch["advantages"],
                    batch["mask"],
                    config.clip_epsilon,
                    completion_tokens,
                    config.kl_coef,
                    ref,
                )
                parts.loss.backward()
                if iteration == 0:
                    first_loss += float(parts.loss.detach())
                clipped += parts.clipped_tokens
                kl_sum += parts.kl_sum
                done += 1
                progress("train", done, total)
            torch.nn.utils.clip_grad_norm_(self.lora.trainable(), config.max_grad_norm)
            optimizer.step()
        seconds = time.perf_counter() - started
        processed = config.iterations * sum(int(b["attention"].sum()) for b in batches)
        masked = config.iterations * sum(int(b["mask"].sum()) for b in batches)
        return {
            **base,
            "applied": True,
            "noopReason": None,
            "loss": first_loss,
            "clipFraction": clipped / max(masked, 1),
            "kl": kl_sum / max(masked, 1),
            "tokens": processed,
            "trainSeconds": seconds,
        }

    @torch.no_grad()
    def _reference_logprobs(self, batches: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
        peft = self.lora.peft
        assert peft is not None
        with peft.disable_adapter():
            return [completion_logprobs(peft, b, b["attention"]) for b in batches]

    def _save(
        self, tmp: Path, final: Path, req: StepRequest, summary: dict[str, Any], started: float
    ) -> dict[str, Any]:
        assert self.lora.peft is not None and self.optimizer is not None
        self.lora.peft.save_pretrained(str(tmp / "adapter"))
        normalise_adapter_config(tmp / "adapter")
        torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
        seconds = summary.pop("trainSeconds")
        return {
            **summary,
            "run": req.run,
            "step": req.step,
            "adapterPath": str(final / "adapter"),
            "adapterHash": adapter_hash(tmp / "adapter"),
            "batchHash": req.batch_hash,
            "iterations": req.config.iterations if summary["applied"] else 0,
            "optimizerSteps": optimizer_steps(self.optimizer),
            "tokensPerSecond": summary["tokens"] / seconds if seconds > 0 else 0.0,
            "elapsedMs": round((time.perf_counter() - started) * 1000),
            "device": self.device.type,
            "completedAt": datetime.now(UTC).isoformat(),
        }
