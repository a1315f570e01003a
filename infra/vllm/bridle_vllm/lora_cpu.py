"""vLLM's CPU LoRA ops, one matrix product per run of tokens that share an adapter.

vLLM's PyTorch LoRA ops (`vllm.lora.ops.torch_ops`), which its CPU backend runs, gather one weight
matrix per token by the token's slot index. A token of a base-model request has the index -1, and
indexing with -1 picks the last slot: once every slot has held an adapter, a base-model request
batched with adapter requests is computed with an adapter's weights. The gather also copies an
adapter matrix per token, which makes LoRA cost as much as the model itself at a few streams.

These ops take the same arguments. Tokens with the index -1 are left as they are, as vLLM's GPU
kernels leave them, and each run of tokens with one adapter is multiplied by that adapter's matrix
once, in the dtype vLLM's own ops compute in. The linear layers' LoRA (`add_lora_linear`, nearly
all of the cost) goes further: per layer and slot it keeps the slices' A matrices side by side and
their B matrices block-diagonal, in float32, so a layer's whole LoRA is two matrix products per
run of tokens instead of two per slice (small bf16 products cost more than float32 ones on CPU).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch

# (start, end, slot) of a run of consecutive tokens that share one slot.
Run = tuple[int, int, int]


def _matrix(stacked: torch.Tensor, slot: int) -> torch.Tensor:
    """One slot's [out, in] matrix of a stacked [slots, 1, out, in] (or [slots, out, in]) tensor."""
    weight = stacked[slot]
    return weight[0] if weight.dim() == 3 else weight


def token_runs(indices: torch.Tensor) -> list[Run]:
    """The runs of equal consecutive slot indices, as (start, end, slot)."""
    count = indices.numel()
    if count == 0:
        return []
    changes = (torch.nonzero(indices[1:] != indices[:-1]).flatten() + 1).tolist()
    starts = [0, *changes]
    ends = [*changes, count]
    slots = indices[starts].tolist()
    return list(zip(starts, ends, slots, strict=True))


def _prefill_runs(seq_starts: torch.Tensor, seq_lengths: torch.Tensor, slots: torch.Tensor) -> list[Run]:
    """The runs vLLM's prefill metadata already describes (consecutive tokens of one slot)."""
    return [
        (start, start + length, slot)
        for start, length, slot in zip(seq_starts.tolist(), seq_lengths.tolist(), slots.tolist(), strict=True)
    ]


def _shrink(x: torch.Tensor, stacked: torch.Tensor, y: torch.Tensor, runs: list[Run], scale: float) -> None:
    for start, end, slot in runs:
        if slot < 0:
            continue
        weight = _matrix(stacked, slot).to(y.dtype)
        out = torch.mm(x[start:end].to(y.dtype), weight.t())
        y[start:end, : out.shape[1]] = out * scale


def _expand(
    x: torch.Tensor,
    stacked: torch.Tensor,
    y: torch.Tensor,
    runs: list[Run],
    offset: int,
    width: int | None,
    add: bool,
) -> None:
    for start, end, slot in runs:
        if slot < 0:
            continue
        weight = _matrix(stacked, slot).to(y.dtype)
        out = torch.mm(x[start:end].to(y.dtype), weight.t())
        columns = out.shape[1] if width is None else width
        columns = min(columns, out.shape[1], y.shape[1] - offset)
        target = y[start:end, offset : offset + columns]
        if add:
            target += out[:, :columns]
        else:
            target.copy_(out[:, :columns])


def bgmv_shrink(
    inputs: torch.Tensor,
    lora_b_weights: torch.Tensor,
    output_tensor: torch.Tensor,
    lora_indices_tensor: torch.Tensor,
    scaling: float = 1.0,
) -> None:
    _shrink(inputs, lora_b_weights, output_tensor, token_runs(lora_indices_tensor), scaling)


def sgmv_shrink(
    inputs: torch.Tensor,
    lora_a_weights: torch.Tensor,
    output_tensor: torch.Tensor,
    b_seq_start_loc: torch.Tensor,
    seq_len_tensor: torch.Tensor,
    lora_indices_tensor: torch.Tensor,
    batches: int,
    max_seq_length: int,
    token_nums: int,
    scaling: float,
) -> None:
    runs = _prefill_runs(b_seq_start_loc, seq_len_tensor, lora_indices_tensor)
    _shrink(inputs, lora_a_weights, output_tensor, runs, scaling)


def bgmv_expand(
    inputs: torch.Tensor,
    lora_b_weights: torch.Tensor,
    output_tensor: torch.Tensor,
    lora_indices_tensor: torch.Tensor,
    add_inputs: bool = True,
) -> None:
    if inputs.shape[0] != output_tensor.shape[0]:
        # vLLM broadcasts a single row over the output here; keep its own op for that case.
        from vllm.lora.ops.torch_ops import bgmv_expand as vllm_bgmv_expand

        vllm_bgmv_expand(inputs, lora_b_weights, output_tensor, lora_indices_tensor, add_inputs)
        return
    _expand(inputs, lora_b_weights, output_tensor, token_runs(lora_indices_tensor), 0, None, add_inputs)


def sgmv_expand(
    inputs: torch.Tensor,
    lora_b_weights: torch.Tensor,
    output_tensor: torch.Tensor,
    b_seq_start_loc: torch.Tensor,
    seq_len_tensor: torch.Tensor,
    lora_indices_tensor: torch.Tensor,
    batches: int,
    max_seq_length: int,
    token_nums: int,
    add_inputs: bool = False,
) -> None:
    runs = _prefill_runs(b_seq_start_loc, seq_len_tensor, lora_indices_tensor)
    _expand(inputs, lora_b_weights, output_tensor, runs, 0, None, add_inputs)


def bgmv_expand_slice(
    inputs: torch.Tensor,
    lora_b_weights: torch.Tensor,
    output_tensor: torch.Tensor,
    lora_indices_tensor: torch.Tensor,
    slice_offset: int,
    slice_size: int,
    add_inputs: bool = True,
) -> None:
    runs = token_runs(lora_indices_tensor)
    _expand(inputs, lora_b_weights, output_tensor, runs, slice_offset, slice_size, add_inputs)


def sgmv_expand_slice(
    inputs: torch.Tensor,
    lora_b_weights: torch.Tensor,
    output_tensor: torch.Tensor,
    b_seq_start_loc: torch.Tensor,
    seq_len_tensor: torch.Tensor,
    lora_indices_tensor: torch.Tensor,
    batches: int,
    max_seq_length: int,
    token_nums: int,
    slice_offset: int,
    slice_size: int,
    add_inputs: bool = False,
) -> None:
    runs = _prefill_runs(b_seq_start_loc, seq_len_tensor, lora_indices_tensor)
    _expand(inputs, lora_b_weights, output_tensor, runs, slice_offset, slice_size, add_inputs)


@dataclass
class _Fused:
    """One layer's LoRA for one slot: [in, slices*rank] and block-diagonal [slices*rank, out]."""

    layer: weakref.ref[torch.Tensor]
    versions: tuple[int, ...]
    a: torch.Tensor
    b: torch.Tensor


# Runs of at most this many tokens (decode) take one float32 block-diagonal product for all slices.
_FUSED_MAX_TOKENS = 16
# Keyed by the id of the layer's first stacked A tensor and the slot; the entry's weak reference
# tells that tensor from a later one given the same id.
_fused: dict[tuple[int, int], _Fused] = {}


def _fused_weights(
    lora_a_stacked: tuple[torch.Tensor, ...], lora_b_stacked: tuple[torch.Tensor, ...], slot: int
) -> _Fused:
    """The slot's fused weights, rebuilt whenever vLLM has written into the stacked tensors."""
    versions = tuple(t._version for t in (*lora_a_stacked, *lora_b_stacked))
    key = (id(lora_a_stacked[0]), slot)
    cached = _fused.get(key)
    if cached is not None and cached.layer() is lora_a_stacked[0] and cached.versions == versions:
        return cached
    a_parts = [_matrix(a, slot).float() for a in lora_a_stacked]  # each [rank, in]
    b_parts = [_matrix(b, slot).float() for b in lora_b_stacked]  # each [out_i, rank]
    a = torch.cat(a_parts, dim=0).t().contiguous()
    b = torch.block_diag(*b_parts).t().contiguous()
    fused = _Fused(weakref.ref(lora_a_stacked[0]), versions, a, b)
    _fused[key] = fused
    return fused


def add_lora_linear(
    self: Any,
    y: torch.Tensor,
    x: torch.Tensor,
    lora_a_stacked: tuple[torch.Tensor, ...],
    lora_b_stacked: tuple[torch.Tensor, ...],
    scale: float,
    output_slices: tuple[int, ...],
    *,
    buffer: tuple[torch.Tensor, ...] | None = None,
    **kwargs: Any,
) -> None:
    """y[:, slices] += x @ A[slot].T @ B[slot].T * scale for each run of tokens with an adapter."""
    if self.is_prefill:
        if self.no_lora:
            return
        runs = _prefill_runs(*self.prefill_metadata[:3])
    else:
        runs = token_runs(self.token_lora_indices)
    y2 = y.view(-1, y.shape[-1])
    x2 = x.view(-1, x.shape[-1])
    width = sum(output_slices)
    for start, end, slot in runs:
        if slot < 0:
            continue
        fused = _fused_weights(lora_a_stacked, lora_b_stacked, slot)
        hidden = torch.mm(x2[start:end].float(), fused.a)
        if scale != 1.0:
            hidden *= scale
        if end - start <= _FUSED_MAX_TOKENS:
            y2[start:end, :width] += torch.mm(hidden, fused.b)
            continue
        # A long run (prefill): the block-diagonal product would multiply the zeros too, and at
        # this size bf16 products (AMX) beat float32 ones, so each slice as vLLM's ops do it.
        hidden = hidden.to(y2.dtype)
        rank = hidden.shape[1] // len(lora_b_stacked)
        offset = 0
        for i, stacked in enumerate(lora_b_stacked):
            b = _matrix(stacked, slot)
            y2[start:end, offset : offset + b.shape[0]] += torch.mm(
                hidden[:, i * rank : (i + 1) * rank], b.t()
            )
            offset += b.shape[0]


OPS = {
    "bgmv_shrink": bgmv_shrink,
    "sgmv_shrink": sgmv_shrink,
    "bgmv_expand": bgmv_expand,
    "sgmv_expand": sgmv_expand,
    "bgmv_expand_slice": bgmv_expand_slice,
    "sgmv_expand_slice": sgmv_expand_slice,
}


def install() -> bool:
    """Points vLLM's CPU punica wrapper at these ops; False when this vLLM has no such wrapper."""
    try:
        from vllm.lora.punica_wrapper import punica_cpu
    except ImportError:
        return False
    if not all(hasattr(punica_cpu, name) for name in OPS):
        return False
    for name, op in OPS.items():
        setattr(punica_cpu, name, op)
    punica_cpu.PunicaWrapperCPU.add_lora_linear = add_lora_linear
    return True
