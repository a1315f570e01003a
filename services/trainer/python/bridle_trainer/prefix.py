"""Sequences that share a prompt prefix, run once for the prefix and once per suffix.

Every call a harness makes re-sends its system prompt, its tools and the task: on the bundled
tasks about 1,400 of a call's 1,500-2,000 prompt tokens are the same for every call of every
rollout of a task. A harness also re-renders the model's tool calls in its own words, so a call's
prompt does not extend the previous call's tokens and calls cannot be chained into one sequence
(see sequences.py); they can share their common prefix instead.

For a group of sequences with a common prefix, the prefix runs once (batch of one, without
gradient) and leaves its keys and values; each micro-batch of suffixes attends to them, expanded
to its rows. Gradients stay exact: the prefix's keys and values enter the suffix passes as leaves
and collect the gradient of every suffix's loss; the prefix then runs again with gradient, in
chunks from its end to its start, each chunk back-propagating what its keys and values received
(from the suffixes and from the later chunks) and passing on what the earlier chunks' keys and
values receive from it. Memory holds one chunk's activations at a time, never the whole
prefix's: on the 0.5B model, a step of 12 calls sharing a 1,400-token prefix peaked at 9.5 GB
with the prefix's activations kept whole, and at 6.8 GB in chunks, at the same speed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache
from transformers.modeling_outputs import CausalLMOutputWithPast

from .grpo import scored_logprobs
from .sequences import Sequence, collate

Item = tuple[Sequence, float]


@dataclass
class PrefixGroup:
    """Sequences whose first `shared` tokens are identical and not scored. `long` members share the
    prefix too, but their suffixes are too long for a micro-batch: each runs alone, in windows
    (see `run_group`)."""

    shared: int
    items: list[Item]
    long: list[Item] = field(default_factory=list)


def _common(a: list[int], b: list[int], limit: int) -> int:
    n = min(len(a), len(b), limit)
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


#: A suffix longer than this runs alone, in windows. A group's passes keep their activations (the
#: shared keys and values need the cache, which gradient checkpointing turns off), and a suffix's
#: activations and attention over prefix + suffix grow with its length: suffixes of 1,000-2,000
#: tokens (a call's earlier turns and tool results) took the worker past 17 GB and the OOM killer.
MAX_SUFFIX = 768
#: Tokens per window of a long suffix: the most whose activations are held at once.
LONG_WINDOW = 512
#: Query-key pairs of a window's attention (kept for its backward pass): 512 tokens over 8,192
#: positions. A window after a longer context is shorter: after Claude Code's 18,740-token prompt,
#: about 220 tokens.
WINDOW_PAIRS = 512 * 8192


def window_size(positions: int, most: int = LONG_WINDOW) -> int:
    """Tokens per window of a long suffix whose sequence has `positions` tokens in all."""
    return max(min(most, 64), min(most, WINDOW_PAIRS // max(positions, 1)))


#: Padded suffix tokens per micro-batch of a shared group (the plain path has its own budget).
SUFFIX_BATCH_TOKENS = 1024
#: Prefix tokens per chunk of the prefix's backward pass (see the module's docstring).
PREFIX_CHUNK = 256
#: Key positions per micro-batch of a shared group, summed over its rows. Each row attends to its
#: own copy of the prefix's keys and values (the cache appends the suffix's to them) and the copies
#: stay for the backward pass: about 24 KB per position on the 0.5B. Claude Code's 18,740-token
#: prompt with micro-batches of 3 and 4 suffixes took a step to 16.1 GB; at this bound a row of
#: that prompt goes alone, a row of OpenCode's 7,230 tokens with three others.
SHARED_BATCH_KEYS = 32_768


def shared_rows(shared: int, widest: int, rows: int) -> int:
    """Rows per micro-batch of a group whose suffixes attend to `shared` prefix positions: at most
    `rows`, at least one, and no more than SHARED_BATCH_KEYS key positions in all."""
    return max(1, min(rows, SHARED_BATCH_KEYS // (shared + widest)))


def prefix_groups(
    items: list[Item], min_shared: int = 128, max_suffix: int = MAX_SUFFIX
) -> list[PrefixGroup]:
    """Groups of sequences sharing at least `min_shared` leading tokens, each with its exact
    common length. The shared part ends before the first generated token of every member, less
    one, so every position whose logits are scored lies in a suffix. A member whose suffix would
    be longer than `max_suffix` is one of the group's `long` members: it still shares the prefix,
    and runs alone in windows of bounded memory."""
    ordered = sorted(items, key=lambda item: item[0].ids)
    groups: list[PrefixGroup] = []
    for item in ordered:
        seq = item[0]
        limit = seq.first_generated - 1
        current = groups[-1] if groups else None
        if current is not None:
            shared = _common(current.items[0][0].ids, seq.ids, min(current.shared, limit))
            if shared >= min_shared:
                current.shared = shared
                current.items.append(item)
                continue
        groups.append(PrefixGroup(shared=max(limit, 0), items=[item]))
    # What shares nothing worth it takes the plain path, batched together as before.
    plain = [item for g in groups if len(g.items) <= 1 or g.shared < min_shared for item in g.items]
    kept = [g for g in groups if len(g.items) > 1 and g.shared >= min_shared]
    for g in kept:
        g.long = [item for item in g.items if len(item[0].ids) - g.shared > max_suffix]
        g.items = [item for item in g.items if len(item[0].ids) - g.shared <= max_suffix]
    return kept + ([PrefixGroup(shared=0, items=plain)] if plain else [])


def windows(seq: Sequence, size: int = LONG_WINDOW) -> list[tuple[int, int, bool]]:
    """The windows `[start, end)` of a long suffix, and whether each scores a token (the logits of
    its positions predict a generated token): windows of tool results alone score nothing."""
    out = []
    for start in range(0, len(seq.ids), size):
        end = min(start + size, len(seq.ids))
        # Position p's logits predict token p + 1, the next window's first token included.
        out.append((start, end, any(seq.generated[start + 1 : end + 1])))
    return out


def scored_windows(group: PrefixGroup, most: int = LONG_WINDOW) -> int:
    """Windows of the group's long suffixes that score tokens: one loss each, like a micro-batch."""
    return sum(
        1
        for seq, _ in group.long
        for *_, scored in windows(suffix(seq, group.shared), window_size(len(seq.ids), most))
        if scored
    )


def prefix_chunks(group: PrefixGroup, chunk: int = PREFIX_CHUNK) -> int:
    """Chunks of the group's prefix that its backward pass runs (none without a shared prefix)."""
    return -(-group.shared // chunk)


def suffix(seq: Sequence, start: int) -> Sequence:
    return Sequence(ids=seq.ids[start:], generated=seq.generated[start:], old=seq.old[start:])


@contextlib.contextmanager
def activations_kept(model: torch.nn.Module) -> Iterator[None]:
    """Gradient checkpointing off for the duration (it also turns the key-value cache off, and
    the shared prefix needs it). A group's passes are short: its prefix once, its suffixes in
    small micro-batches, so keeping their activations costs little memory and saves the
    recomputation."""
    flags = {m: m.gradient_checkpointing for m in model.modules() if hasattr(m, "gradient_checkpointing")}
    for m in flags:
        m.gradient_checkpointing = False
    try:
        yield
    finally:
        for m, flag in flags.items():
            m.gradient_checkpointing = flag


OnBatch = Callable[[dict[str, torch.Tensor], torch.Tensor], torch.Tensor | None]


def run_group(
    model: torch.nn.Module,
    group: PrefixGroup,
    batches: Callable[[list[Item]], list[dict[str, torch.Tensor]]],
    temperature: float,
    precision: Callable[[], contextlib.AbstractContextManager[None]],
    on_batch: OnBatch,
    grad: bool,
    prefix_chunk: int = PREFIX_CHUNK,
    on_chunk: Callable[[], None] = lambda: None,
    window: int = LONG_WINDOW,
) -> None:
    """Runs the group's micro-batches (built by `batches` from the suffixes) after its prefix, then
    each long suffix alone in windows (`_run_long`). `on_batch` gets each micro-batch or scoring
    window and its scored logprobs and returns the loss to back-propagate (with `grad`), or None;
    `on_chunk` is told of each chunk of the prefix's backward pass (with a long prefix, most of the
    step's time: see `prefix_chunks`)."""
    with activations_kept(model) if group.shared else contextlib.nullcontext():
        shared = group.shared
        leaves: list[tuple[torch.Tensor, torch.Tensor]] = []
        prefix: torch.Tensor | None = None
        if shared > 0:
            prefix = torch.tensor([group.items[0][0].ids[:shared]], device=next(model.parameters()).device)
            with precision(), torch.no_grad():
                out = model(input_ids=prefix, use_cache=True, logits_to_keep=1)
            leaves = [
                (layer.keys.requires_grad_(grad), layer.values.requires_grad_(grad))
                for layer in out.past_key_values.layers
            ]
            del out
        items = [(suffix(seq, shared), adv) for seq, adv in group.items] if shared else group.items
        for batch in batches(items):
            rows = batch["ids"].shape[0]
            if shared:
                past = DynamicCache(
                    [(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)) for k, v in leaves]
                )
                attention = batch["attention"]
                mask = (
                    None
                    if bool(attention.all())
                    else torch.cat(
                        [torch.ones(rows, shared, dtype=attention.dtype, device=attention.device), attention],
                        1,
                    )
                )
            else:
                past = None
                mask = None if bool(batch["attention"].all()) else batch["attention"]
            with precision(), torch.set_grad_enabled(grad):
                logits = model(
                    input_ids=batch["ids"],
                    attention_mask=mask,
                    past_key_values=past,
                    logits_to_keep=batch["keep"],
                ).logits
                new = scored_logprobs(logits, batch["targets"], temperature)
            loss = on_batch(batch, new)
            if grad and loss is not None:
                loss.backward()
        # What the long suffixes send back to the prefix's keys and values, summed in float32.
        # (allocated only for a group that has long members)
        extra = (
            [tuple(torch.zeros_like(t, dtype=torch.float32) for t in pair) for pair in leaves]
            if group.long
            else None
        )
        for seq, adv in group.long:
            _run_long(
                model,
                leaves,
                extra,
                (suffix(seq, shared), adv),
                temperature,
                precision,
                on_batch,
                grad,
                window_size(len(seq.ids), window),
            )
        if grad and prefix is not None:
            _backward_prefix(model, prefix, leaves, precision, prefix_chunk, on_chunk, extra)


def _run_long(
    model: torch.nn.Module,
    leaves: list[tuple[torch.Tensor, torch.Tensor]],
    extra: list[tuple[torch.Tensor, ...]],
    item: Item,
    temperature: float,
    precision: Callable[[], contextlib.AbstractContextManager[None]],
    on_batch: OnBatch,
    grad: bool,
    size: int,
) -> None:
    """One long suffix after the shared prefix, in windows, as `_backward_prefix` runs a prefix:
    a pass without gradient leaves the keys and values of every position; then each window, from
    the last, runs again with gradient on the keys and values before it (as leaves), its loss and
    the gradient its own keys and values received from later windows back-propagated together, and
    what reaches earlier positions is handed on (the prefix's part into `extra`). Memory holds one
    window's activations; the prefix is never run again. Windows that score nothing still carry
    the gradient through; `on_batch` is called for the others, last window first, in both passes."""
    seq, adv = item
    device = next(model.parameters()).device
    parts = windows(seq, size)
    prefix_kv = [(k.detach(), v.detach()) for k, v in leaves]
    shared = prefix_kv[0][0].shape[2]
    ids = torch.tensor([seq.ids], device=device)

    def batch_of(start: int, end: int) -> dict[str, torch.Tensor]:
        # One token past the window: the target of its last position (never run in this window).
        stop = min(end + 1, len(seq.ids))
        window = Sequence(
            ids=seq.ids[start:stop],
            generated=[False, *seq.generated[start + 1 : stop]],
            old=[0.0, *seq.old[start + 1 : stop]],
        )
        batch = collate([(window, adv)], device)
        batch["ids"] = batch["ids"][:, : end - start]
        batch["attention"] = batch["attention"][:, : end - start]
        return batch

    scored: list[tuple[dict[str, torch.Tensor], torch.Tensor]] = []
    with precision(), torch.no_grad():
        cache = DynamicCache(prefix_kv)
        for start, end, scores in parts:
            batch = batch_of(start, end) if scores and not grad else None
            out = model(
                input_ids=ids[:, start:end],
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=batch["keep"] if batch is not None else 1,
            )
            if batch is not None:
                scored.append((batch, scored_logprobs(out.logits, batch["targets"], temperature)))
            del out
        kv = [(layer.keys, layer.values) for layer in cache.layers]
    if not grad:
        for batch, new in reversed(scored):
            on_batch(batch, new)
        return
    pending = [tuple(torch.zeros_like(t, dtype=torch.float32) for t in pair) for pair in kv]
    for start, end, scores in reversed(parts):
        at, to = shared + start, shared + end
        earlier = [(k[:, :, :at].requires_grad_(), v[:, :, :at].requires_grad_()) for k, v in kv]
        batch = batch_of(start, end) if scores else None
        with precision(), torch.enable_grad():
            out = model(
                input_ids=ids[:, start:end],
                past_key_values=DynamicCache(earlier),
                use_cache=True,
                logits_to_keep=batch["keep"] if batch is not None else 1,
            )
            loss = None
            if batch is not None:
                loss = on_batch(batch, scored_logprobs(out.logits, batch["targets"], temperature))
        _backward_through(out, pending, earlier, at, to, loss)
        del out
    for (gk, gv), (ek, ev) in zip(pending, extra, strict=True):
        ek += gk[:, :, :shared]
        ev += gv[:, :, :shared]


def _backward_prefix(
    model: torch.nn.Module,
    prefix: torch.Tensor,
    leaves: list[tuple[torch.Tensor, torch.Tensor]],
    precision: Callable[[], contextlib.AbstractContextManager[None]],
    chunk: int,
    on_chunk: Callable[[], None],
    extra: list[tuple[torch.Tensor, ...]] | None,
) -> None:
    """Back-propagates the gradient that the prefix's keys and values collected (from the batched
    suffixes, and in `extra` from the long ones), one chunk of the prefix at a time from its end,
    so only one chunk's activations are ever held."""
    kv = [(k.detach(), v.detach()) for k, v in leaves]

    # Summed in float32 whatever the keys' format (bf16 under autocast): each position's gradient
    # gathers the suffixes' and every later chunk's.
    def collected(t: torch.Tensor, e: torch.Tensor | None) -> torch.Tensor:
        if e is None:
            return torch.zeros_like(t, dtype=torch.float32) if t.grad is None else t.grad.float()
        return e if t.grad is None else e + t.grad.float()

    pending = [
        tuple(collected(t, e) for t, e in zip(pair, sums, strict=True))
        for pair, sums in zip(leaves, extra or [(None, None)] * len(leaves), strict=True)
    ]
    total = prefix.shape[1]
    for start in reversed(range(0, total, chunk)):
        end = min(start + chunk, total)
        earlier = [(k[:, :, :start].requires_grad_(), v[:, :, :start].requires_grad_()) for k, v in kv]
        with precision(), torch.enable_grad():
            out = model(
                input_ids=prefix[:, start:end],
                past_key_values=DynamicCache(earlier) if start > 0 else None,
                use_cache=True,
                logits_to_keep=1,
            )
        _backward_through(out, pending, earlier, start, end)
        del out
        on_chunk()


def _backward_through(
    out: CausalLMOutputWithPast,
    pending: list[tuple[torch.Tensor, ...]],
    earlier: list[tuple[torch.Tensor, torch.Tensor]],
    at: int,
    to: int,
    loss: torch.Tensor | None = None,
) -> None:
    """Back-propagates, through a pass over positions [at, to), its loss (if any) and the gradient
    that later positions sent to its keys and values (`pending`, float32), then adds to `pending`
    what reached the keys and values before it (`earlier`, the pass's gradient-collecting leaves)."""
    roots: list[torch.Tensor] = [] if loss is None else [loss]
    grads: list[torch.Tensor | None] = [] if loss is None else [None]
    for layer, (gk, gv) in zip(out.past_key_values.layers, pending, strict=True):
        roots += [layer.keys[:, :, at:to], layer.values[:, :, at:to]]
        grads += [gk[:, :, at:to].to(layer.keys.dtype), gv[:, :, at:to].to(layer.values.dtype)]
    torch.autograd.backward(roots, grads)
    for (k, v), (gk, gv) in zip(earlier, pending, strict=True):
        if k.grad is not None:
            gk[:, :, :at] += k.grad.float()
        if v.grad is not None:
            gv[:, :, :at] += v.grad.float()
