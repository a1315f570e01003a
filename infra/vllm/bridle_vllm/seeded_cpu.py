"""Seeded sampling on CPU across a chunked prefill.

A prompt longer than one scheduler step's token budget is prefilled in chunks. After every chunk
but the last, vLLM samples a token for the request and throws it away; for a request with a seed it
then rewinds the request's random generator so the tokens it keeps do not depend on how the prompt
was chunked. The rewind moves a CUDA Philox generator's offset back (`set_offset`), which a CPU
generator does not have: on vLLM's CPU backend the first seeded request with a prompt over the
budget raises "CPU Generator does not use offset" in the engine, and the engine dies with every
request it holds (a harness's system prompt and tools alone pass 4,096 tokens).

Here a CPU generator is rewound the way it can be: its state is saved before the sampler runs and
put back in place of the offset rewind, so a seeded request samples the same tokens however its
prompt was chunked, as on a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch


def _cpu_generators_to_rewind(runner: Any) -> dict[int, tuple[torch.Generator, torch.Tensor]]:
    """The batch rows whose sample this step is thrown away and whose generator is a CPU one, with
    the generator's state before sampling."""
    batch = runner.input_batch
    if runner.execute_model_state is None or not batch.generators:
        return {}
    discarded = np.nonzero(runner.discard_request_mask.np[: batch.num_reqs])[0]
    held: dict[int, tuple[torch.Generator, torch.Tensor]] = {}
    for index in discarded.tolist():
        generator = batch.generators.get(index)
        if generator is not None and generator.device.type == "cpu":
            held[index] = (generator, generator.get_state())
    return held


def _wrap_sample_tokens(sample_tokens: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        held = _cpu_generators_to_rewind(self)
        if not held:
            return sample_tokens(self, *args, **kwargs)
        bookkeeping = self._bookkeeping_sync
        generators = self.input_batch.generators

        def rewound_bookkeeping(*b_args: Any, **b_kwargs: Any) -> Any:
            # The sample is drawn: put each generator back as it was before it, and keep it out of
            # vLLM's own offset rewind while it runs.
            for index, (generator, state) in held.items():
                generator.set_state(state)
                generators.pop(index, None)
            try:
                return bookkeeping(*b_args, **b_kwargs)
            finally:
                for index, (generator, _) in held.items():
                    generators[index] = generator

        self._bookkeeping_sync = rewound_bookkeeping
        try:
            return sample_tokens(self, *args, **kwargs)
        finally:
            del self._bookkeeping_sync

    wrapped.__bridle_seeded_cpu__ = True  # type: ignore[attr-defined]
    return wrapped


def install() -> bool:
    """Wraps the model runner's `sample_tokens`; False when this vLLM's runner has no such step or
    no bookkeeping step to rewind in (its own rewind then stands, with the fault above)."""
    try:
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    except ImportError:
        return False
    sample_tokens = getattr(GPUModelRunner, "sample_tokens", None)
    if sample_tokens is None or not hasattr(GPUModelRunner, "_bookkeeping_sync"):
        return False
    if getattr(sample_tokens, "__bridle_seeded_cpu__", False):
        return True
    GPUModelRunner.sample_tokens = _wrap_sample_tokens(sample_tokens)
    return True
