import math

import pytest

from bridle_trainer.batch import parse_step
from bridle_trainer.errors import StepError


def request(**over):
    call = {"promptTokenIds": [1, 2, 3], "completionTokenIds": [4, 5], "logprobs": [-0.5, -1.0]}
    base = {"run": "r1", "step": 1, "trajectories": [{"group": "g", "reward": 1.0, "calls": [call]}]}
    base.update(over)
    return base


def error_of(raw) -> StepError:
    with pytest.raises(StepError) as info:
        parse_step(raw, vocab_size=100, max_tokens=64)
    return info.value


def test_a_valid_request_parses_with_defaults():
    parsed = parse_step(request(), vocab_size=100, max_tokens=64)
    assert parsed.config.rank == 8 and parsed.trajectories[0].calls[0].completion_token_ids == [4, 5]
    assert len(parsed.batch_hash) == 64


def test_the_batch_hash_follows_the_data():
    a = parse_step(request(), vocab_size=100, max_tokens=64).batch_hash
    b = parse_step(request(config={"learningRate": 1e-3}), vocab_size=100, max_tokens=64).batch_hash
    assert a != b


def test_an_empty_batch_is_a_step_and_a_missing_one_is_refused():
    assert parse_step(request(trajectories=[]), vocab_size=100, max_tokens=64).trajectories == []
    err = error_of(request(trajectories={"group": "g"}))
    assert err.status == 400 and err.path == "trajectories" and "list" in err.message


def test_token_ids_outside_the_vocabulary_are_named():
    call = {"promptTokenIds": [1, 100], "completionTokenIds": [4], "logprobs": [-1.0]}
    err = error_of(request(trajectories=[{"group": "g", "reward": 0, "calls": [call]}]))
    assert err.path == "trajectories.0.calls.0.promptTokenIds.1" and "outside" in err.message


def test_mismatched_lengths_are_named():
    call = {"promptTokenIds": [1], "completionTokenIds": [4, 5, 6], "logprobs": [-1.0]}
    err = error_of(request(trajectories=[{"group": "g", "reward": 0, "calls": [call]}]))
    assert err.path == "trajectories.0.calls.0.logprobs" and "1 entries for 3" in err.message


def test_nan_logprobs_are_refused():
    call = {"promptTokenIds": [1], "completionTokenIds": [4], "logprobs": [math.nan]}
    err = error_of(request(trajectories=[{"group": "g", "reward": 0, "calls": [call]}]))
    assert err.path == "trajectories.0.calls.0.logprobs.0" and "finite" in err.message


def test_a_bad_run_id_is_refused():
    assert error_of(request(run="../escape")).path == "run"
