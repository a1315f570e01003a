"""The CPU attention path (attention.py) against transformers' own `sdpa`."""

from __future__ import annotations

import torch
from conftest import model_dir


def test_grouped_heads_give_sdpas_output_and_gradients_with_a_past_and_padding():
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from bridle_trainer.attention import grouped_sdpa

    torch.manual_seed(0)

    class Layer(torch.nn.Module):
        num_key_value_groups = 7
        is_causal = True

    rows, queries, keys = 3, 5, 12  # 7 past keys, then 5 new: masked, with the last row padded
    mask = torch.ones(queries, keys, dtype=torch.bool).tril(keys - queries)[None, None].repeat(rows, 1, 1, 1)
    mask[2, :, :, -2:] = False
    outs, grads = [], []
    for attend in (sdpa_attention_forward, grouped_sdpa):
        q = torch.randn(rows, 14, queries, 64, generator=torch.Generator().manual_seed(1), requires_grad=True)
        k = torch.randn(rows, 2, keys, 64, generator=torch.Generator().manual_seed(2), requires_grad=True)
        v = torch.randn(rows, 2, keys, 64, generator=torch.Generator().manual_seed(3), requires_grad=True)
        out, _ = attend(Layer(), q, k, v, mask, scaling=0.125)
        out.square().sum().backward()
        outs.append(out)
        grads.append((q.grad, k.grad, v.grad))
    torch.testing.assert_close(outs[1], outs[0])
    for mine, theirs in zip(grads[1], grads[0], strict=True):
        torch.testing.assert_close(mine, theirs)


def test_the_trainer_model_computes_what_transformers_sdpa_computes():
    from transformers import AutoModelForCausalLM

    from bridle_trainer.model import load_base

    ours = load_base(model_dir(), torch.device("cpu"))
    assert ours.config._attn_implementation == "bridle_grouped_sdpa"
    theirs = AutoModelForCausalLM.from_pretrained(
        model_dir(), dtype=torch.float32, attn_implementation="sdpa"
    )
    ids = torch.tensor([[1, 504, 3575, 282, 4649, 314, 7042, 30], [1, 504, 3575, 282, 0, 0, 0, 0]])
    attention = (torch.arange(8) < torch.tensor([[8], [4]])).long()
    with torch.no_grad():
        a = ours(input_ids=ids, attention_mask=attention).logits
        b = theirs(input_ids=ids, attention_mask=attention).logits
    torch.testing.assert_close(a[attention.bool()], b[attention.bool()], rtol=1e-4, atol=1e-4)
