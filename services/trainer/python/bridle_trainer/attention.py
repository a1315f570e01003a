"""Grouped-query attention that never copies the keys and values once per query head.

Qwen2.5's attention has 14 query heads over 2 key-value heads. Given a mask, transformers' `sdpa`
repeats every layer's keys and values 7 times before calling the kernel (the CUDA kernels cannot
take a mask and grouped heads at once), and the copies stay alive for the backward pass. On the
CPU the kernel takes both, so the copies are pure cost: a shared-prefix pass of 6 suffixes over a
7,230-token prompt kept 7.9 GB of repeated keys and values for 24 layers, and 0.7 GB without them
(same result, a third faster). Every mask the trainer builds is a padding or past-key mask, so
this path is taken on each of its micro-batches.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "bridle_grouped_sdpa"


def grouped_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **_: object,
) -> tuple[torch.Tensor, None]:
    """transformers' `sdpa` attention with the grouped heads handed to the kernel as they are."""
    queries, keys = query.shape[2], key.shape[2]
    if attention_mask is None and queries > 1 and keys != queries:
        raise ValueError("attention over past keys needs a mask")
    # The kernel's own causal flag only when nothing else masks (queries and keys then align).
    causal = (
        attention_mask is None
        and queries > 1
        and bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    )
    out = torch.nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=causal,
        enable_gqa=query.shape[1] != key.shape[1],
    )
    return out.transpose(1, 2).contiguous(), None


def register() -> str:
    """Registers the attention under NAME (idempotent) and returns the name for `from_pretrained`."""
    AttentionInterface.register(NAME, grouped_sdpa)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME
