"""Bridle's vLLM general plugin, loaded by vLLM in every process it starts (entry point
`vllm.general_plugins`, installed by the bootstrap)."""

from __future__ import annotations


def register() -> None:
    """Replaces the ops of vLLM's CPU LoRA path (see lora_cpu), makes seeded sampling survive a
    chunked prefill on CPU (see seeded_cpu), and loads adapters that serving names by URL (see
    adapter_fetch); each a no-op where vLLM has no such part."""
    from vllm.logger import init_logger

    from . import adapter_fetch, seeded_cpu
    from .lora_cpu import install

    logger = init_logger("vllm.bridle")
    if not adapter_fetch.install():
        logger.warning(
            "bridle: this vLLM's LoRA worker has no path resolution to extend; adapters load by path only"
        )

    if install():
        logger.info("bridle: CPU LoRA ops grouped by adapter; tokens without one are left to the base model")
    else:
        # A vLLM whose CPU LoRA wrapper changed: its own ops serve, with the fault lora_cpu describes.
        logger.warning(
            "bridle: this vLLM has no CPU LoRA wrapper to patch; on CPU, base-model requests batched "
            "beside adapter requests may be computed with an adapter's weights"
        )
    if not seeded_cpu.install():
        logger.warning(
            "bridle: this vLLM's model runner has no sampling step to patch; on CPU, a seeded request "
            "whose prompt is prefilled in chunks may stop the engine"
        )
