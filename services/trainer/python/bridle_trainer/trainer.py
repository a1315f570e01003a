"""One GRPO step, exactly once per (run, step), on the model the worker keeps in memory."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from .batch import StepRequest, TrainConfig, validate_or_raise
from .errors import StepError
from .grpo import group_advantages, grpo_loss
from .model import LoraModel, load_base, pick_device
from .prefix import (
    MAX_SUFFIX,
    SUFFIX_BATCH_TOKENS,
    OnBatch,
    PrefixGroup,
    prefix_chunks,
    prefix_groups,
    run_group,
    scored_windows,
    shared_rows,
    suffix,
)
from .sequences import Sequence, collate, merge_calls
from .store import StepStore, adapter_hash, normalise_adapter_config

Progress = Callable[[str, int, int], None]


def micro_batches(
    items: list[tuple[Sequence, float]], rows: int, tokens: int
) -> list[list[tuple[Sequence, float]]]:
    """Sequences, longest first, in batches of at most `rows` rows and about `tokens` padded tokens."""
    ordered = sorted(items, key=lambda item: len(item[0].ids), reverse=True)
    batches: list[list[tuple[Sequence, float]]] = []
    for item in ordered:
        current = batches[-1] if batches else None
        if current and len(current) < rows and len(current[0][0].ids) * (len(current) + 1) <= tokens:
            current.append(item)
        else:
            batches.append([item])
    return batches


def optimizer_steps(optimizer: torch.optim.Optimizer) -> int:
    """How many updates this optimiser state has applied in total (Adam's own step counter)."""
    for state in optimizer.state.values():
        step = state.get("step")
        if step is not None:
            return int(step)
    return 0


class Trainer:
    """Holds the base model and the last committed step's adapter and optimiser state in memory."""

    def __init__(
        self, model_dir: Path, data_dir: Path, device: str = "auto", precision: str = "fp32"
    ) -> None:
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"precision must be fp32 or bf16, not {precision!r}")
        self.device = pick_device(device)
        # The base model's name, kept in every step record: an adapter only continues on its own base.
        self.base_model = model_dir.resolve().name
        base = load_base(model_dir, self.device)
        self.vocab_size = int(base.config.vocab_size)
        self.max_tokens = int(base.config.max_position_embeddings)
        self.lora = LoraModel(base, self.device)
        # bf16: bf16 matmuls over fp32 master weights (several times faster where the CPU has AMX).
        self.autocast = precision == "bf16"
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
        if req.step == 1 and req.parent is None:
            self.lora.fresh(config)
            self.optimizer = self._new_optimizer(config)
            return
        if req.step == 1:
            assert req.parent is not None
            # A run that continues a lineage: the parent's weights, a new optimiser (a new run).
            self._check_parent(req)
            parent = self.store.step_dir(req.parent.run, req.parent.step)
            self._check_shape(req.run, parent / "adapter", config)
            self.lora.restore(config, parent / "adapter")
            self.optimizer = self._new_optimizer(config)
            return
        previous = self.store.step_dir(req.run, req.step - 1)
        self._check_shape(req.run, previous / "adapter", config)
        self.lora.restore(config, previous / "adapter")
        self.optimizer = self._new_optimizer(config)
        self.optimizer.load_state_dict(torch.load(previous / "optimizer.pt", map_location=self.device))
        for group in self.optimizer.param_groups:
            group["lr"] = config.learning_rate

    def _check_shape(self, run: str, adapter_dir: Path, config: TrainConfig) -> None:
        saved = json.loads((adapter_dir / "adapter_config.json").read_text())
        shape = (saved["r"], float(saved["lora_alpha"]), tuple(sorted(saved["target_modules"])))
        if shape != config.lora_key():
            raise StepError(
                409, "lora_shape_changed", f"run {run} starts from LoRA {shape}; the request asks for another"
            )

    def _check_parent(self, req: StepRequest) -> None:
        """The parent exists here, is the adapter its hash names, and was trained on this base model."""
        parent = req.parent
        assert parent is not None
        done = self.store.result(parent.run, parent.step)
        name = f"step {parent.step} of run {parent.run}"
        if done is None:
            raise StepError(404, "parent_not_found", f"{name} is not committed on this trainer")
        if done.get("adapterHash") != parent.hash:
            raise StepError(
                409,
                "parent_mismatch",
                f"{name} holds adapter {str(done.get('adapterHash'))[:12]}, not {parent.hash[:12]}",
            )
        trained_on = done.get("baseModel")
        if trained_on != self.base_model:
            raise StepError(
                409,
                "base_model_mismatch",
                f"the adapter of {name} was trained on {trained_on or 'an unrecorded base model'}; "
                f"this trainer holds {self.base_model}",
            )

    def _new_optimizer(self, config: TrainConfig) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.lora.trainable(), lr=config.learning_rate, weight_decay=0.0)

    def _train(self, req: StepRequest, progress: Progress) -> dict[str, Any]:
        config, peft, optimizer = req.config, self.lora.peft, self.optimizer
        assert peft is not None and optimizer is not None
        advantages = group_advantages(req.trajectories, config.scale_by_std)
        calls = sum(len(t.calls) for t in req.trajectories)
        items = [
            (seq, a)
            for t, a in zip(req.trajectories, advantages, strict=True)
            for seq in merge_calls(t.calls)
        ]
        completion_tokens = sum(sum(seq.generated) for seq, _ in items)
        base = {
            "completionTokens": completion_tokens,
            "calls": calls,
            "sequences": len(items),
            "advantages": advantages,
        }
        if all(a == 0 for a in advantages):
            return {
                **base,
                "applied": False,
                "noopReason": "zero_advantage" if advantages else "empty_batch",
                "loss": 0.0,
                "clipFraction": 0.0,
                "kl": 0.0,
                "logprobDiff": None,
                "tokens": 0,
                "trainSeconds": 0.0,
            }
        # Zero-advantage sequences add nothing to the surrogate; they matter only for the KL term.
        used = items if config.kl_coef > 0 else [(s, a) for s, a in items if a != 0]
        # Calls of one task share most of their prompt: each group's prefix runs once (prefix.py).
        # A suffix longer than a shared group's micro-batch runs alone, in windows.
        suffix_tokens = min(config.micro_batch_tokens, SUFFIX_BATCH_TOKENS)
        groups = prefix_groups(used, max_suffix=min(MAX_SUFFIX, suffix_tokens))

        def chunked(
            group: PrefixGroup, group_items: list[tuple[Sequence, float]]
        ) -> list[list[tuple[Sequence, float]]]:
            # A shared group keeps its activations: its suffixes go in smaller micro-batches, fewer
            # of them the longer the prefix they attend to.
            if not group.shared:
                return micro_batches(group_items, config.micro_batch_size, config.micro_batch_tokens)
            widest = max(len(seq.ids) for seq, _ in group_items)
            rows = shared_rows(group.shared, widest, config.micro_batch_size)
            return micro_batches(group_items, rows, suffix_tokens)

        def builder(
            group: PrefixGroup,
        ) -> Callable[[list[tuple[Sequence, float]]], list[dict[str, torch.Tensor]]]:
            return lambda group_items: [collate(chunk, self.device) for chunk in chunked(group, group_items)]

        # Progress units: micro-batches, and the scoring windows of long suffixes (prefix.py).
        units = sum(
            len(chunked(g, g.items if not g.shared else [(suffix(s, g.shared), a) for s, a in g.items]))
            + scored_windows(g)
            for g in groups
        )
        measure_kl = config.kl_coef > 0 or (config.measure_kl and self.lora.trained)
        refs: list[torch.Tensor] = []

        def run(group: PrefixGroup, on_batch: OnBatch, grad: bool, on_chunk: Callable[[], None]) -> None:
            run_group(
                peft,
                group,
                builder(group),
                config.temperature,
                self.precision,
                on_batch,
                grad,
                on_chunk=on_chunk,
            )

        if measure_kl:
            with torch.no_grad(), peft.disable_adapter():
                for group in groups:
                    run(group, lambda _batch, new: refs.append(new.detach()), False, lambda: None)
        # A shared prefix's backward runs in chunks after its suffixes (prefix.py): with a harness's
        # long prompt that is most of the step, so its chunks count as units of progress too.
        chunks = sum(prefix_chunks(g) for g in groups)
        total, done = config.iterations * (units + chunks), 0

        def advance() -> None:
            nonlocal done
            done += 1
            progress("train", done, total)

        stats = {"loss": 0.0, "clipped": 0, "kl": 0.0, "drift": 0.0, "masked": 0, "tokens": 0}
        peft.train()
        started = time.perf_counter()
        for iteration in range(config.iterations):
            optimizer.zero_grad(set_to_none=True)
            ref_of = iter(refs)

            def on_batch(
                batch: dict[str, torch.Tensor],
                new: torch.Tensor,
                first: bool = iteration == 0,
                ref_of: Iterator[torch.Tensor] = ref_of,
            ) -> torch.Tensor:
                ref = next(ref_of) if measure_kl else None
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
                if first:
                    stats["loss"] += float(parts.loss.detach())
                    # Before the first update the policy is the one that sampled: any gap here is a
                    # mismatch between the model server's numbers and the trainer's.
                    stats["drift"] += float(((new.detach() - batch["old"]).abs() * batch["mask"]).sum())
                    stats["kl"] += parts.kl_sum
                    stats["masked"] += int(batch["mask"].sum())
                stats["clipped"] += parts.clipped_tokens
                advance()
                return parts.loss

            for group in groups:
                # Each token once per pass: the shared prefix once, then every suffix.
                stats["tokens"] += group.shared + sum(
                    len(seq.ids) - group.shared for seq, _ in [*group.items, *group.long]
                )
                run(group, on_batch, True, advance)
            torch.nn.utils.clip_grad_norm_(self.lora.trainable(), config.max_grad_norm)
            optimizer.step()
        self.lora.trained = True
        seconds = time.perf_counter() - started
        masked = stats["masked"]
        return {
            **base,
            "applied": True,
            "noopReason": None,
            "loss": stats["loss"],
            "clipFraction": stats["clipped"] / max(masked * config.iterations, 1),
            "kl": stats["kl"] / max(masked, 1),
            "logprobDiff": stats["drift"] / max(masked, 1),
            # Tokens run through the model (a shared prefix counts once per group and iteration).
            "tokens": stats["tokens"],
            "sequenceTokens": sum(len(seq.ids) for seq, _ in used),
            "prefixGroups": sum(1 for g in groups if g.shared),
            "trainSeconds": seconds,
        }

    def precision(self) -> contextlib.AbstractContextManager[None]:
        """bf16 matmuls (AMX on CPUs that have it) with fp32 master weights, or plain fp32."""
        if self.autocast:
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

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
            "baseModel": self.base_model,
            "parent": (
                {"run": req.parent.run, "step": req.parent.step, "hash": req.parent.hash}
                if req.parent
                else None
            ),
            "refused": req.refused,
            "completedAt": datetime.now(UTC).isoformat(),
        }
