"""The step request: LoRA and GRPO settings plus a batch of scored trajectories, validated."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import StepError, bad_batch

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class TrainConfig:
    """LoRA shape and optimiser settings. The LoRA shape must not change within a run."""

    rank: int = 8
    alpha: float = 16.0
    target_modules: tuple[str, ...] = DEFAULT_TARGETS
    learning_rate: float = 1e-5
    clip_epsilon: float = 0.2
    kl_coef: float = 0.0
    scale_by_std: bool = False
    iterations: int = 1
    micro_batch_size: int = 8
    micro_batch_tokens: int = 2048
    temperature: float = 1.0
    measure_kl: bool = True
    max_grad_norm: float = 1.0
    seed: int = 0

    def lora_key(self) -> tuple[int, float, tuple[str, ...]]:
        return (self.rank, self.alpha, tuple(sorted(self.target_modules)))


@dataclass(frozen=True)
class ModelCall:
    """One model call of a rollout: the prompt, the sampled completion and its sampling logprobs."""

    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    logprobs: list[float]


@dataclass(frozen=True)
class Trajectory:
    """One rollout: its group (same task), its reward, and its model calls."""

    group: str
    reward: float
    calls: list[ModelCall]


@dataclass(frozen=True)
class StepRef:
    """A committed step of a run, and the hash its adapter must have."""

    run: str
    step: int
    hash: str


@dataclass(frozen=True)
class StepRequest:
    run: str
    step: int
    config: TrainConfig
    trajectories: list[Trajectory]
    batch_hash: str = field(default="")
    # Step 1 only: the committed step whose adapter the run starts from (lineage).
    parent: StepRef | None = None
    # Samples the service did not pass on (not proven served by the step's version): recorded only.
    refused: int = 0


def _int(value: Any, path: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_batch(path, f"expected an integer, got {json.dumps(value)[:40]}")
    if not low <= value <= high:
        raise bad_batch(path, f"{value} is outside [{low}, {high}]")
    return value


def _finite(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise bad_batch(path, f"expected a finite number, got {json.dumps(value)[:40]}")
    return float(value)


def _token_ids(value: Any, path: str, vocab_size: int) -> list[int]:
    if not isinstance(value, list):
        raise bad_batch(path, "expected a list of token ids")
    return [_int(t, f"{path}.{i}", 0, vocab_size - 1) for i, t in enumerate(value)]


def parse_config(raw: Any) -> TrainConfig:
    raw = raw or {}
    if not isinstance(raw, dict):
        raise bad_batch("config", "expected an object")
    defaults = TrainConfig()
    targets = raw.get("targetModules", list(defaults.target_modules))
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) and t for t in targets):
        raise bad_batch("config.targetModules", "expected a non-empty list of module names")
    config = TrainConfig(
        rank=_int(raw.get("rank", defaults.rank), "config.rank", 1, 256),
        alpha=_finite(raw.get("alpha", defaults.alpha), "config.alpha"),
        target_modules=tuple(targets),
        learning_rate=_finite(raw.get("learningRate", defaults.learning_rate), "config.learningRate"),
        clip_epsilon=_finite(raw.get("clipEpsilon", defaults.clip_epsilon), "config.clipEpsilon"),
        kl_coef=_finite(raw.get("klCoef", defaults.kl_coef), "config.klCoef"),
        scale_by_std=bool(raw.get("scaleByStd", defaults.scale_by_std)),
        iterations=_int(raw.get("iterations", defaults.iterations), "config.iterations", 1, 64),
        micro_batch_size=_int(
            raw.get("microBatchSize", defaults.micro_batch_size), "config.microBatchSize", 1, 1024
        ),
        micro_batch_tokens=_int(
            raw.get("microBatchTokens", defaults.micro_batch_tokens),
            "config.microBatchTokens",
            64,
            10_000_000,
        ),
        temperature=_finite(raw.get("temperature", defaults.temperature), "config.temperature"),
        measure_kl=bool(raw.get("measureKl", defaults.measure_kl)),
        max_grad_norm=_finite(raw.get("maxGradNorm", defaults.max_grad_norm), "config.maxGradNorm"),
        seed=_int(raw.get("seed", defaults.seed), "config.seed", 0, 2**31 - 1),
    )
    if config.learning_rate <= 0 or config.clip_epsilon <= 0 or config.kl_coef < 0:
        raise bad_batch("config", "learningRate and clipEpsilon must be > 0, klCoef >= 0")
    if not 0 < config.temperature <= 2:
        raise bad_batch("config.temperature", "the sampling temperature must be in (0, 2]")
    return config


def batch_hash(raw: dict[str, Any]) -> str:
    """A content hash of what a step trains on, so a resubmission with other data is caught."""
    payload = {k: raw.get(k) for k in ("config", "trajectories")}
    if raw.get("parent") is not None:
        payload["parent"] = raw["parent"]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def parse_step(raw: Any, vocab_size: int, max_tokens: int) -> StepRequest:
    """Validates a step request; every problem is a 400 naming its path."""
    if not isinstance(raw, dict):
        raise bad_batch("(root)", "expected an object")
    run = raw.get("run")
    if not isinstance(run, str) or not RUN_ID.match(run):
        raise bad_batch("run", "expected 1-128 characters of letters, digits, '.', '_' or '-'")
    step = _int(raw.get("step"), "step", 1, 10_000_000)
    config = parse_config(raw.get("config"))
    items = raw.get("trajectories")
    # Empty is a step whose rollouts all failed: a recorded no-op, so the run's next step follows it.
    if not isinstance(items, list):
        raise bad_batch("trajectories", "expected a list of scored trajectories")
    trajectories = [_trajectory(t, f"trajectories.{i}", vocab_size, max_tokens) for i, t in enumerate(items)]
    parent = _parent(raw.get("parent"), step)
    # The service may send its own hash of the request so it can check replays without the worker.
    given = raw.get("batchHash")
    hashed = given if isinstance(given, str) else batch_hash(raw)
    refused = _int(raw.get("refused", 0), "refused", 0, 10_000_000)
    return StepRequest(run, step, config, trajectories, hashed, parent, refused)


def _parent(raw: Any, step: int) -> StepRef | None:
    if raw is None:
        return None
    if step != 1:
        raise bad_batch("parent", "only a run's first step starts from a parent adapter")
    if not isinstance(raw, dict):
        raise bad_batch("parent", "expected {run, step, hash}")
    run = raw.get("run")
    if not isinstance(run, str) or not RUN_ID.match(run):
        raise bad_batch("parent.run", "expected 1-128 characters of letters, digits, '.', '_' or '-'")
    digest = raw.get("hash")
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise bad_batch("parent.hash", "expected a sha256 in hex")
    return StepRef(run, _int(raw.get("step"), "parent.step", 1, 10_000_000), digest)


def _trajectory(raw: Any, path: str, vocab_size: int, max_tokens: int) -> Trajectory:
    if not isinstance(raw, dict):
        raise bad_batch(path, "expected an object")
    group = raw.get("group")
    if not isinstance(group, str) or not group:
        raise bad_batch(f"{path}.group", "expected a non-empty string")
    reward = _finite(raw.get("reward"), f"{path}.reward")
    calls_raw = raw.get("calls")
    if not isinstance(calls_raw, list) or not calls_raw:
        raise bad_batch(f"{path}.calls", "a trajectory needs at least one model call")
    calls = []
    for j, c in enumerate(calls_raw):
        cp = f"{path}.calls.{j}"
        if not isinstance(c, dict):
            raise bad_batch(cp, "expected an object")
        prompt = _token_ids(c.get("promptTokenIds"), f"{cp}.promptTokenIds", vocab_size)
        completion = _token_ids(c.get("completionTokenIds"), f"{cp}.completionTokenIds", vocab_size)
        lps = c.get("logprobs")
        if not isinstance(lps, list):
            raise bad_batch(f"{cp}.logprobs", "expected a list of numbers")
        logprobs = [_finite(v, f"{cp}.logprobs.{k}") for k, v in enumerate(lps)]
        if not prompt or not completion:
            raise bad_batch(cp, "prompt and completion each need at least one token")
        if len(logprobs) != len(completion):
            raise bad_batch(
                f"{cp}.logprobs", f"has {len(logprobs)} entries for {len(completion)} completion tokens"
            )
        if any(v > 0 for v in logprobs):
            raise bad_batch(f"{cp}.logprobs", "log-probabilities must be <= 0")
        if len(prompt) + len(completion) > max_tokens:
            raise bad_batch(cp, f"{len(prompt) + len(completion)} tokens exceed the limit of {max_tokens}")
        calls.append(ModelCall(prompt, completion, logprobs))
    return Trajectory(group, reward, calls)


def validate_or_raise(raw: Any, vocab_size: int, max_tokens: int) -> StepRequest:
    try:
        return parse_step(raw, vocab_size, max_tokens)
    except StepError:
        raise
    except (TypeError, ValueError) as err:  # defensive: malformed shapes the checks above missed
        raise bad_batch("(root)", str(err)) from err
