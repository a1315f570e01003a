"""Adapters by URL: a model server loads an adapter that serving names by URL
(`<serving>/v1/adapter-files/<hash>`), so a vLLM node on another host than serving needs none of
serving's disk. The files are fetched once into a local cache (`BRIDLE_ADAPTER_CACHE`, one folder
per content hash), checked against the hash the URL names, and loaded from there; a plain path
loads as vLLM always did. The hash is the one serving and the trainer compute: sha256 over the two
files, each as name, NUL, bytes, NUL."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

FILES = ("adapter_config.json", "adapter_model.safetensors")
FETCH_TIMEOUT_S = 300
_HASH = re.compile(r"^[0-9a-f]{64}$")
# Folders this process checked: vLLM resolves the path again each time it swaps an adapter back in.
_verified: set[Path] = set()


class AdapterFetchError(RuntimeError):
    """The adapter named by a URL could not be fetched, or its files are not what the URL names."""


def cache_root() -> Path:
    default = Path(tempfile.gettempdir()) / "bridle-vllm-adapters"
    return Path(os.environ.get("BRIDLE_ADAPTER_CACHE") or default)


def content_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for name in FILES:
        digest.update(f"{name}\0".encode())
        digest.update((folder / name).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def fetch(url: str) -> str:
    """The local folder of the adapter at `url`, fetched and checked unless the cache has it."""
    expected = url.rstrip("/").rsplit("/", 1)[-1]
    if not _HASH.match(expected):
        raise AdapterFetchError(f"{url} does not end in an adapter's sha256 content hash")
    root = cache_root()
    final = root / expected
    if final in _verified and final.is_dir():
        return str(final)
    if final.is_dir():
        try:
            if content_hash(final) == expected:
                _verified.add(final)
                return str(final)
        except OSError:
            pass  # a partial or damaged copy: fetched again below
    root.mkdir(parents=True, exist_ok=True)
    part = Path(tempfile.mkdtemp(dir=root, prefix=f"{expected}.part-"))
    try:
        for name in FILES:
            try:
                with urllib.request.urlopen(f"{url.rstrip('/')}/{name}", timeout=FETCH_TIMEOUT_S) as answer:
                    (part / name).write_bytes(answer.read())
            except OSError as err:
                raise AdapterFetchError(f"cannot fetch {url}/{name}: {err}") from err
        got = content_hash(part)
        if got != expected:
            raise AdapterFetchError(f"the files at {url} hash to {got}, not {expected}")
        shutil.rmtree(final, ignore_errors=True)
        try:
            os.replace(part, final)
        except OSError:
            # Another load of the same adapter got there first: its copy is the same content.
            if not (final.is_dir() and content_hash(final) == expected):
                raise
    finally:
        shutil.rmtree(part, ignore_errors=True)
    _verified.add(final)
    return str(final)


def resolver(original: Callable[[str], str]) -> Callable[[str], str]:
    """vLLM's path resolution, with http(s) URLs fetched first."""

    def resolve(lora_path: str) -> str:
        if lora_path.startswith(("http://", "https://")):
            return fetch(lora_path)
        return original(lora_path)

    return resolve


def install() -> bool:
    """Routes the LoRA worker's path resolution through `fetch`; False where vLLM has no such step."""
    try:
        from vllm.lora import worker_manager
    except ImportError:
        return False
    original = getattr(worker_manager, "get_adapter_absolute_path", None)
    if original is None:
        return False
    if getattr(original, "__bridle__", False):
        return True
    resolve = resolver(original)
    resolve.__bridle__ = True  # type: ignore[attr-defined]
    worker_manager.get_adapter_absolute_path = resolve
    return True
