"""The CPU LoRA ops against a per-token reference, and against vLLM's own ops where those are right."""

from __future__ import annotations

import pytest
import torch
from vllm.lora.ops import torch_ops

from bridle_vllm import lora_cpu

SLOTS, RANK, HIDDEN, OUT = 3, 8, 64, 96


@pytest.fixture
def weights() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    a = torch.randn(SLOTS, 1, RANK, HIDDEN, dtype=torch.bfloat16)
    b = torch.randn(SLOTS, 1, OUT, RANK, dtype=torch.bfloat16)
    return a, b


def reference(
    x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, slots: list[int], scale: float
) -> torch.Tensor:
    """y = x @ A[slot].T @ B[slot].T * scale per token; nothing for a token without an adapter."""
    out = torch.zeros(x.shape[0], OUT, dtype=torch.float32)
    for row, slot in enumerate(slots):
        if slot >= 0:
            hidden = x[row].float() @ a[slot, 0].float().t() * scale
            out[row] = hidden @ b[slot, 0].float().t()
    return out


def prefill_meta(slots: list[int]) -> tuple[torch.Tensor, ...]:
    indices = torch.tensor(slots)
    runs, lengths = torch.unique_consecutive(indices, return_counts=True)
    starts = torch.zeros_like(lengths)
    starts[1:] = torch.cumsum(lengths, 0)[:-1]
    return starts, lengths, runs


def apply(ops: object, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, slots: list[int], prefill: bool):
    base = torch.ones(x.shape[0], OUT, dtype=torch.bfloat16)
    y = base.clone()
    buffer = torch.zeros(x.shape[0], RANK, dtype=torch.float32)
    if prefill:
        starts, lengths, runs = prefill_meta(slots)
        meta = (starts, lengths, runs, len(runs), int(lengths.max()), x.shape[0])
        ops.sgmv_shrink(x, a, buffer, *meta, 0.5)
        ops.sgmv_expand(buffer, b, y, *meta, add_inputs=True)
    else:
        indices = torch.tensor(slots)
        ops.bgmv_shrink(x, a, buffer, indices, 0.5)
        ops.bgmv_expand(buffer, b, y, indices, add_inputs=True)
    return y.float() - base.float()


@pytest.mark.parametrize("prefill", [True, False])
def test_every_token_gets_its_own_adapter_and_base_tokens_none(weights, prefill):
    a, b = weights
    slots = [0, 0, -1, -1, 2, 1, 1, -1, 2, 2]
    x = torch.randn(len(slots), HIDDEN, dtype=torch.bfloat16)
    got = apply(lora_cpu, x, a, b, slots, prefill)
    want = reference(x, a, b, slots, 0.5)
    assert torch.allclose(got, want, rtol=0.05, atol=0.5), (got - want).abs().max()
    base_rows = [i for i, s in enumerate(slots) if s < 0]
    assert torch.count_nonzero(got[base_rows]) == 0


@pytest.mark.parametrize("prefill", [True, False])
def test_matches_vllm_where_every_token_has_an_adapter(weights, prefill):
    a, b = weights
    slots = [1, 1, 1, 0, 0, 2]
    x = torch.randn(len(slots), HIDDEN, dtype=torch.bfloat16)
    ours = apply(lora_cpu, x, a, b, slots, prefill)
    theirs = apply(torch_ops, x, a, b, slots, prefill)
    assert torch.allclose(ours, theirs, rtol=0.02, atol=0.1)


def test_vllm_own_ops_give_base_tokens_the_last_slot(weights):
    """Why the plugin exists: with vLLM's ops a token without an adapter gets the last slot's."""
    a, b = weights
    slots = [0, -1]
    x = torch.randn(2, HIDDEN, dtype=torch.bfloat16)
    theirs = apply(torch_ops, x, a, b, slots, prefill=True)
    assert torch.count_nonzero(theirs[1]) > 0
    assert torch.allclose(theirs[1], reference(x, a, b, [0, SLOTS - 1], 0.5)[1], rtol=0.05, atol=0.5)


def test_expand_slice_writes_only_its_columns(weights):
    _, b = weights
    slots = [0, -1, 1]
    x = torch.randn(3, RANK, dtype=torch.float32)
    y = torch.zeros(3, OUT + 32, dtype=torch.bfloat16)
    starts, lengths, runs = prefill_meta(slots)
    lora_cpu.sgmv_expand_slice(x, b, y, starts, lengths, runs, 3, 1, 3, 16, OUT, add_inputs=True)
    assert torch.count_nonzero(y[:, :16]) == 0
    assert torch.count_nonzero(y[:, 16 + OUT :]) == 0
    assert torch.count_nonzero(y[1]) == 0
    want = x[2].to(torch.bfloat16).float() @ b[1, 0].float().t()
    assert torch.allclose(y[2, 16 : 16 + OUT].float(), want, rtol=0.05, atol=0.5)


def test_runs_of_consecutive_slots():
    assert lora_cpu.token_runs(torch.tensor([3, 3, -1, 0, 0, 0, 3])) == [
        (0, 2, 3),
        (2, 3, -1),
        (3, 6, 0),
        (6, 7, 3),
    ]
    assert lora_cpu.token_runs(torch.tensor([], dtype=torch.long)) == []


def test_the_plugin_replaces_the_ops_of_vllms_cpu_wrapper():
    from importlib.metadata import entry_points

    from vllm.lora.punica_wrapper import punica_cpu

    plugins = {p.name: p.value for p in entry_points(group="vllm.general_plugins")}
    assert plugins.get("bridle") == "bridle_vllm:register"
    assert lora_cpu.install()
    for name, op in lora_cpu.OPS.items():
        assert getattr(punica_cpu, name) is op
    assert punica_cpu.PunicaWrapperCPU.add_lora_linear is lora_cpu.add_lora_linear


class Wrapper:
    """The state of vLLM's punica wrapper that add_lora_linear reads."""

    def __init__(self, slots: list[int], prefill: bool):
        self.is_prefill = prefill
        starts, lengths, runs = prefill_meta(slots)
        self.no_lora = len(runs) == 1 and int(runs[0]) == -1
        self.prefill_metadata = (starts, lengths, runs, len(runs), int(lengths.max()), len(slots))
        self.token_lora_indices = torch.tensor(slots)


def stacked_slices(sizes: tuple[int, ...]) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    a = tuple(torch.randn(SLOTS, 1, RANK, HIDDEN, dtype=torch.bfloat16) for _ in sizes)
    b = tuple(torch.randn(SLOTS, 1, size, RANK, dtype=torch.bfloat16) for size in sizes)
    return a, b


SHORT_RUNS = [2, 2, -1, 0, 0, -1, -1, 1]  # decode-sized: one block-diagonal product
LONG_RUNS = [0] * 20 + [-1] * 5 + [2] * 30  # prefill-sized: a product per slice


@pytest.mark.parametrize("prefill", [True, False])
@pytest.mark.parametrize("slots", [SHORT_RUNS, LONG_RUNS], ids=["short-runs", "long-runs"])
def test_fused_linear_lora_matches_the_reference_per_slice(prefill, slots):
    torch.manual_seed(1)
    sizes = (40, 24, 24)  # a qkv-like layer: three slices of one output
    a, b = stacked_slices(sizes)
    x = torch.randn(len(slots), HIDDEN, dtype=torch.bfloat16)
    y = torch.ones(len(slots), sum(sizes), dtype=torch.bfloat16)
    lora_cpu.add_lora_linear(Wrapper(slots, prefill), y, x, a, b, 0.5, sizes)
    got = y.float() - 1
    want = torch.cat(
        [_slice_reference(x, ai, bi, slots, 0.5, size) for ai, bi, size in zip(a, b, sizes, strict=True)],
        dim=1,
    )
    assert torch.allclose(got, want, rtol=0.02, atol=0.5), (got - want).abs().max()
    base_rows = [i for i, slot in enumerate(slots) if slot < 0]
    assert torch.count_nonzero(got[base_rows]) == 0


def _slice_reference(x, a, b, slots, scale, size):
    out = torch.zeros(x.shape[0], size)
    for row, slot in enumerate(slots):
        if slot >= 0:
            out[row] = (x[row].float() @ a[slot, 0].float().t() * scale) @ b[slot, 0].float().t()
    return out


def test_fused_weights_follow_a_new_adapter_in_the_slot():
    torch.manual_seed(2)
    sizes = (32,)
    a, b = stacked_slices(sizes)
    x = torch.randn(3, HIDDEN, dtype=torch.bfloat16)
    wrapper = Wrapper([1, 1, 1], prefill=True)
    first = torch.zeros(3, 32, dtype=torch.bfloat16)
    lora_cpu.add_lora_linear(wrapper, first, x, a, b, 1.0, sizes)
    b[0][1].copy_(torch.randn(1, 32, RANK, dtype=torch.bfloat16))  # as vLLM's set_lora writes a slot
    second = torch.zeros(3, 32, dtype=torch.bfloat16)
    lora_cpu.add_lora_linear(wrapper, second, x, a, b, 1.0, sizes)
    assert not torch.equal(first, second)
    assert torch.allclose(
        second.float(), _slice_reference(x, a[0], b[0], [1, 1, 1], 1.0, 32), rtol=0.02, atol=0.5
    )


def test_no_adapter_in_the_batch_leaves_the_output_alone():
    a, b = stacked_slices((32,))
    y = torch.ones(4, 32, dtype=torch.bfloat16)
    lora_cpu.add_lora_linear(Wrapper([-1] * 4, prefill=True), y, torch.randn(4, HIDDEN), a, b, 1.0, (32,))
    lora_cpu.add_lora_linear(Wrapper([-1] * 4, prefill=False), y, torch.randn(4, HIDDEN), a, b, 1.0, (32,))
    assert torch.equal(y, torch.ones(4, 32, dtype=torch.bfloat16))
