"""Adapters by URL: fetched over real HTTP from a local file server, checked against the hash the
URL names, cached per hash, and refused when the content differs."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridle_vllm import adapter_fetch


def write_adapter(folder: Path, weights: bytes) -> str:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text('{"r": 8, "lora_alpha": 16}')
    (folder / "adapter_model.safetensors").write_bytes(weights)
    return adapter_fetch.content_hash(folder)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """Serves tmp_path/files over HTTP; yields its URL, the folder and the paths asked for."""
    files = tmp_path / "files"
    files.mkdir()
    asked: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            asked.append(self.path)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=files))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", files, asked
    finally:
        httpd.shutdown()


def test_fetches_checks_and_caches_by_hash(server, tmp_path, monkeypatch):
    url, files, asked = server
    monkeypatch.setenv("BRIDLE_ADAPTER_CACHE", str(tmp_path / "cache"))
    digest = write_adapter(files / "adapter-files" / "x", b"weights-1")
    (files / "adapter-files" / "x").rename(files / "adapter-files" / digest)

    local = adapter_fetch.fetch(f"{url}/adapter-files/{digest}")
    assert Path(local) == tmp_path / "cache" / digest
    assert adapter_fetch.content_hash(Path(local)) == digest
    assert len(asked) == 2
    # Cached: the same URL is not fetched again; the path resolution vLLM calls goes through it.
    resolve = adapter_fetch.resolver(lambda path: f"local:{path}")
    assert resolve(f"{url}/adapter-files/{digest}") == local
    assert len(asked) == 2
    assert resolve("/srv/adapters/a") == "local:/srv/adapters/a"
    assert not any(p.name.startswith(f"{digest}.part-") for p in (tmp_path / "cache").iterdir())


def test_refuses_other_content_an_unreachable_source_and_a_url_without_a_hash(server, tmp_path, monkeypatch):
    url, files, _ = server
    monkeypatch.setenv("BRIDLE_ADAPTER_CACHE", str(tmp_path / "cache"))
    real = write_adapter(files / "real", b"weights-1")
    write_adapter(files / "adapter-files" / real, b"forged")  # other bytes under the real hash
    with pytest.raises(adapter_fetch.AdapterFetchError, match=f"hash to [0-9a-f]{{64}}, not {real}"):
        adapter_fetch.fetch(f"{url}/adapter-files/{real}")
    assert not (tmp_path / "cache" / real).exists()
    with pytest.raises(adapter_fetch.AdapterFetchError, match="cannot fetch"):
        adapter_fetch.fetch(f"{url}/adapter-files/{'0' * 64}")
    with pytest.raises(adapter_fetch.AdapterFetchError, match="content hash"):
        adapter_fetch.fetch(f"{url}/adapter-files/latest")


def test_install_extends_the_lora_worker_once():
    pytest.importorskip("vllm")
    from vllm.lora import worker_manager

    assert adapter_fetch.install()
    first = worker_manager.get_adapter_absolute_path
    assert adapter_fetch.install()
    assert worker_manager.get_adapter_absolute_path is first
    assert first("/an/absolute/path") == "/an/absolute/path"
