import json

import pytest

from bridle_trainer.store import StepStore


def test_a_commit_is_all_or_nothing(tmp_path):
    store = StepStore(tmp_path)

    def crash(tmp):
        (tmp / "adapter").mkdir()
        raise RuntimeError("killed while writing")

    with pytest.raises(RuntimeError):
        store.commit("r", 1, crash)
    assert store.result("r", 1) is None
    assert list((tmp_path / "runs" / "r" / "steps").iterdir()) == []

    def write(tmp):
        (tmp / "optimizer.pt").write_bytes(b"x")
        return {"ok": True}

    assert store.commit("r", 1, write) == {"ok": True}
    assert store.result("r", 1) == {"ok": True}
    assert json.loads((store.step_dir("r", 1) / "result.json").read_text()) == {"ok": True}


def test_leftovers_of_a_crash_are_removed_at_start(tmp_path):
    leftover = tmp_path / "runs" / "r" / "steps" / ".tmp-00000003-123"
    leftover.mkdir(parents=True)
    assert StepStore(tmp_path).clean_partial() == 1 and not leftover.exists()
