"""The base model, held in memory for the worker's life, and the LoRA adapter on top of it."""

from __future__ import annotations

from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model, set_peft_model_state_dict
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, PreTrainedModel

from . import attention as attention_impl
from .batch import TrainConfig


def pick_device(requested: str = "auto") -> torch.device:
    """CUDA when present (or asked for), else CPU; the same code runs on both."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


def load_base(model_dir: Path, device: torch.device) -> PreTrainedModel:
    # CPU trains in float32 (bf16 matmuls lose the small LoRA updates); CUDA keeps the base in bf16.
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    # On the CPU, grouped heads go to the kernel as they are (attention.py); CUDA keeps transformers' choice.
    attention = attention_impl.register() if device.type == "cpu" else "sdpa"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation=attention)
    model.config.use_cache = False
    # An agent's call is thousands of tokens: keeping every layer's activations for the backward pass
    # took 18 GB for one step of four rollouts on the 0.5B. Recomputing them per layer costs about a
    # third more compute and keeps a step's memory to a few GB.
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model.to(device)


class LoraModel:
    """Wraps the base model with one LoRA adapter whose shape follows the step's config."""

    def __init__(self, base: PreTrainedModel, device: torch.device) -> None:
        self.device = device
        self._base = base
        self.peft: PeftModel | None = None
        self._key: tuple[int, float, tuple[str, ...]] | None = None
        # Whether the adapter differs from its zero initialisation (then its KL to the base is measured).
        self.trained = False

    def fresh(self, config: TrainConfig) -> PeftModel:
        """A newly initialised adapter (B = 0, so it starts equal to the base model), seeded."""
        if self.peft is not None:
            self._base = self.peft.unload()
        torch.manual_seed(config.seed)
        lora = LoraConfig(
            r=config.rank,
            lora_alpha=config.alpha,
            target_modules=list(config.target_modules),
            lora_dropout=0.0,
            bias="none",
            task_type="CAUSAL_LM",
        )
        self.peft = get_peft_model(self._base, lora)
        self.trained = False
        self.peft.to(self.device)
        self._key = config.lora_key()
        return self.peft

    def restore(self, config: TrainConfig, adapter_dir: Path) -> PeftModel:
        """Loads a saved adapter's weights into an adapter of the same shape."""
        peft = self.peft if self._key == config.lora_key() and self.peft is not None else self.fresh(config)
        state = load_file(str(adapter_dir / "adapter_model.safetensors"), device=str(self.device))
        outcome = set_peft_model_state_dict(peft, state)
        if outcome.unexpected_keys:
            raise ValueError(f"adapter has unexpected keys, e.g. {outcome.unexpected_keys[:2]}")
        self.trained = True
        return peft

    def trainable(self) -> list[torch.nn.Parameter]:
        assert self.peft is not None
        return [p for p in self.peft.parameters() if p.requires_grad]
