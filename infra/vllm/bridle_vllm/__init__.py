"""Bridle's vLLM general plugin, loaded by vLLM in every process it starts (entry point
`vllm.general_plugins`, installed by the bootstrap)."""

from __future__ import annotations


def register() -> None:
    """Replaces the ops of vLLM's CPU LoRA path (see lora_cpu); a no-op where vLLM has none."""
    from vllm.logger import init_logger

    from .lora_cpu import install

    logger = init_logger("vllm.bridle")

    if install():
        logger.info("bridle: CPU LoRA ops grouped by adapter; tokens without one are left to the base model")
    else:
        # A vLLM whose CPU LoRA wrapper changed: its own ops serve, with the fault lora_cpu describes.
        logger.warning(
            "bridle: this vLLM has no CPU LoRA wrapper to patch; on CPU, base-model requests batched "
            "beside adapter requests may be computed with an adapter's weights"
        )
