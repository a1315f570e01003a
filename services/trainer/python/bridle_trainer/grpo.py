"""GRPO: group-relative advantages and the clipped policy-gradient loss on completion tokens."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import torch

from .batch import Trajectory


def group_advantages(trajectories: list[Trajectory], scale_by_std: bool) -> list[float]:
    """Reward minus its group's mean; optionally divided by the group's standard deviation.

    A group whose rewards are all equal teaches nothing, so its advantages are exactly zero.
    """
    groups: dict[str, list[float]] = defaultdict(list)
    for t in trajectories:
        groups[t.group].append(t.reward)
    stats: dict[str, tuple[float, float]] = {}
    for name, rewards in groups.items():
        mean = sum(rewards) / len(rewards)
        var = sum((r - mean) ** 2 for r in rewards) / len(rewards)
        stats[name] = (mean, math.sqrt(var))
    out = []
    for t in trajectories:
        mean, std = stats[t.group]
        adv = t.reward - mean
        if scale_by_std and std > 0:
            adv /= std + 1e-6
        out.append(0.0 if abs(adv) < 1e-12 else adv)
    return out


@dataclass
class LossParts:
    loss: torch.Tensor
    clipped_tokens: int
    kl_sum: float


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Log-probability of each next token: position i scores input_ids[i + 1]."""
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    return logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


def scored_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probability of each target token under logits already aligned with it, at a temperature."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def grpo_loss(
    new_logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_epsilon: float,
    normaliser: int,
    kl_coef: float = 0.0,
    ref_logprobs: torch.Tensor | None = None,
) -> LossParts:
    """PPO-style clipped surrogate against the sampling logprobs, summed over completion tokens and
    divided by the batch's completion-token count (so micro-batches add up to the batch mean).

    Shapes: logprobs and mask are [batch, positions]; advantages is [batch].
    """
    ratio = torch.exp(new_logprobs - old_logprobs)
    adv = advantages.unsqueeze(-1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * adv
    per_token = -torch.minimum(unclipped, clipped)
    kl_sum = 0.0
    if ref_logprobs is not None:
        # k3 estimator of KL(policy || base): always >= 0, unbiased, low variance. Measured whenever
        # the base's logprobs are at hand; part of the loss only with a positive coefficient.
        log_ratio = ref_logprobs - new_logprobs
        kl = torch.exp(log_ratio) - log_ratio - 1
        if kl_coef > 0:
            per_token = per_token + kl_coef * kl
        kl_sum = float((kl * mask).sum().detach())
    loss = (per_token * mask).sum() / max(normaliser, 1)
    clipped_tokens = int((((ratio - 1).abs() > clip_epsilon) & (mask > 0)).sum())
    return LossParts(loss, clipped_tokens, kl_sum)
