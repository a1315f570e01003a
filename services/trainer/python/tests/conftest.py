from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]


def model_dir() -> Path:
    home = Path(os.environ.get("BRIDLE_HOME", REPO / ".bridle"))
    return home / "models" / "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def trainer_factory():
    """Builds Trainers on the embedded model; the base model load is shared through one instance."""
    from bridle_trainer.trainer import Trainer

    cache: dict[str, Trainer] = {}

    def make(data: Path) -> Trainer:
        if "t" not in cache:
            cache["t"] = Trainer(model_dir(), data, "cpu")
        trainer = cache["t"]
        trainer.store.root = data
        trainer._state_of = None
        return trainer

    return make
