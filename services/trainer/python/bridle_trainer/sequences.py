"""A rollout's model calls as training sequences: one per chain of calls that extend each other.

A harness re-sends the whole conversation on every call, so call k + 1's prompt usually starts
with call k's prompt and completion, token for token. Such a chain is one sequence: the last
call's tokens, with the tokens each call generated marked as scored. Training on it once instead
of on every call's prompt again cuts the tokens a step processes by about the number of turns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .batch import ModelCall


@dataclass
class Sequence:
    """Token ids and, per token, whether the model generated it (and with what sampling logprob)."""

    ids: list[int] = field(default_factory=list)
    generated: list[bool] = field(default_factory=list)
    old: list[float] = field(default_factory=list)

    @property
    def first_generated(self) -> int:
        return self.generated.index(True)

    def extend(self, tokens: list[int], generated: bool, logprobs: list[float] | None = None) -> None:
        self.ids += tokens
        self.generated += [generated] * len(tokens)
        self.old += logprobs if logprobs is not None else [0.0] * len(tokens)

    def continued_by(self, call: ModelCall) -> bool:
        n = len(self.ids)
        return len(call.prompt_token_ids) >= n and call.prompt_token_ids[:n] == self.ids


def merge_calls(calls: list[ModelCall]) -> list[Sequence]:
    """Chains of calls that extend each other, each as one sequence, in call order."""
    sequences: list[Sequence] = []
    for call in calls:
        current = sequences[-1] if sequences else None
        if current is None or not current.continued_by(call):
            current = Sequence()
            sequences.append(current)
        current.extend(call.prompt_token_ids[len(current.ids) :], generated=False)
        current.extend(call.completion_token_ids, generated=True, logprobs=call.logprobs)
    return sequences


def collate(items: list[tuple[Sequence, float]], device: torch.device) -> dict[str, torch.Tensor]:
    """Right-padded ids and attention mask, and the scored positions' mask and sampling logprobs.

    Logits are computed only where the next token was generated (`keep`, the union over rows):
    an agent's prompt and tool results are most of a sequence, and a vocabulary-wide row of logits
    per position would be most of a step's memory and a good part of its time.
    """
    width = max(len(seq.ids) for seq, _ in items)
    ids = torch.zeros(len(items), width, dtype=torch.long)
    attention = torch.zeros(len(items), width, dtype=torch.long)
    scored = sorted({p - 1 for seq, _ in items for p, g in enumerate(seq.generated) if g and p > 0})
    column = {p: i for i, p in enumerate(scored)}
    mask = torch.zeros(len(items), len(scored))
    old = torch.zeros(len(items), len(scored))
    for row, (seq, _) in enumerate(items):
        ids[row, : len(seq.ids)] = torch.tensor(seq.ids)
        attention[row, : len(seq.ids)] = 1
        for p, (generated, logprob) in enumerate(zip(seq.generated, seq.old, strict=True)):
            if generated and p > 0:
                mask[row, column[p - 1]] = 1
                old[row, column[p - 1]] = logprob
    keep = torch.tensor(scored, dtype=torch.long)
    advantages = torch.tensor([adv for _, adv in items])
    tensors = {
        "ids": ids,
        "attention": attention,
        "mask": mask,
        "old": old,
        "advantages": advantages,
        "keep": keep,
        "targets": ids[:, keep + 1],
    }
    return {k: v.to(device) for k, v in tensors.items()}
