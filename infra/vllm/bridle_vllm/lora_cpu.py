"""vLLM's CPU LoRA ops, one matrix product per run of tokens that share an adapter.

vLLM's PyTorch LoRA ops (`vllm.lora.ops.torch_ops`), which its CPU backend runs, gather one weight
matrix per token by the token's slot index. A token of a base-model request has the index -1, and
indexing with -1 picks the last slot: once every slot has held an adapter, a base-model request
batched with adapter requests is computed with an adapter's weights. The gather also copies an
adapter matrix per token, which makes LoRA cost as much as the model itself at a few streams.

These ops take the same arguments. Tokens with the index -1 are left as they are, as vLLM's GPU
kernels leave them, and each run of tokens with one adapter is multiplied by that adapter's matrix
once, in the dtype vLLM's own ops compute in.
"""

from __future__ import annotations

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
    return True
