"""Writes a PEFT LoRA adapter for the base model without training: random weights (visibly different
from the base model) or the zero initialisation (identical to it). Serving's tests and the reload
benchmark use it to get real, vLLM-loadable adapters in a second.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, PreTrainedModel

from .batch import DEFAULT_TARGETS
from .store import normalise_adapter_config


def make_adapter(
    base: PreTrainedModel,
    out: Path,
    seed: int,
    zero: bool,
    rank: int = 8,
    targets: tuple[str, ...] = DEFAULT_TARGETS,
    std: float = 0.02,
) -> PreTrainedModel:
    """Writes one adapter and returns the base model, unwrapped again for the next one."""
    torch.manual_seed(seed)
    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        target_modules=list(targets),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        init_lora_weights=True,
    )
    model = get_peft_model(base, config)
    if not zero:
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "lora_B" in name:
                    param.normal_(0.0, std)
    model.save_pretrained(str(out))
    normalise_adapter_config(out)
    return model.unload()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=1, help="write <out>-0 ... <out>-<count-1>")
    parser.add_argument("--zero", action="store_true", help="B = 0: an adapter equal to the base model")
    parser.add_argument(
        "--std",
        type=float,
        default=0.02,
        help="standard deviation of the random B matrices: how far the adapter moves the model",
    )
    parser.add_argument(
        "--targets",
        default=",".join(DEFAULT_TARGETS),
        help="comma-separated module names to adapt (default: the trainer's)",
    )
    args = parser.parse_args()
    targets = tuple(t for t in args.targets.split(",") if t)
    if not targets:
        parser.error("--targets: name at least one module")
    base = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    if args.count == 1:
        make_adapter(base, args.out, args.seed, args.zero, targets=targets, std=args.std)
        return
    for i in range(args.count):
        base = make_adapter(base, Path(f"{args.out}-{i}"), args.seed + i, args.zero, targets=targets, std=args.std)


if __name__ == "__main__":
    main()
