"""The trainer on the real embedded model (CPU): learning direction, exactly-once records, no-ops."""

import pytest
import torch
from safetensors.torch import load_file

from bridle_trainer.errors import StepError
from bridle_trainer.grpo import token_logprobs

PROMPT = [1, 504, 3575, 282, 4649, 314]
GOOD = [7042, 30, 198]
BAD = [1345, 2000, 42]
CONFIG = {"learningRate": 2e-3, "iterations": 2, "rank": 8, "alpha": 16}


def sequence_logprob(trainer, completion) -> float:
    ids = torch.tensor([PROMPT + completion])
    with torch.no_grad():
        lps = token_logprobs(trainer.lora.peft(input_ids=ids).logits, ids)
    return float(lps[0, len(PROMPT) - 1 :].sum())


def base_logprobs(trainer, completion) -> list[float]:
    ids = torch.tensor([PROMPT + completion])
    with torch.no_grad(), trainer.lora.peft.disable_adapter():
        lps = token_logprobs(trainer.lora.peft(input_ids=ids).logits, ids)
    return [float(x) for x in lps[0, len(PROMPT) - 1 :]]


def batch(trainer, run, step, rewards=(1.0, 0.0), config=CONFIG):
    trajectories = [
        {
            "group": "g",
            "reward": r,
            "calls": [
                {"promptTokenIds": PROMPT, "completionTokenIds": c, "logprobs": base_logprobs(trainer, c)}
            ],
        }
        for r, c in zip(rewards, (GOOD, BAD), strict=True)
    ]
    return {"run": run, "step": step, "config": config, "trajectories": trajectories}


def noop(*_args) -> None:
    return None


@pytest.fixture
def trainer(trainer_factory, tmp_path):
    t = trainer_factory(tmp_path)
    t.lora.fresh(_cfg())
    return t


def _cfg():
    from bridle_trainer.batch import parse_config

    return parse_config(CONFIG)


def test_a_step_raises_the_rewarded_completion_relative_to_the_other(trainer):
    gap_before = sequence_logprob(trainer, GOOD) - sequence_logprob(trainer, BAD)
    events = []
    result = trainer.step(batch(trainer, "learn", 1), lambda *e: events.append(e))
    gap_after = sequence_logprob(trainer, GOOD) - sequence_logprob(trainer, BAD)
    assert result["applied"] is True and result["optimizerSteps"] == 2
    assert gap_after > gap_before + 0.1
    saved = load_file(f"{result['adapterPath']}/adapter_model.safetensors")
    assert max(float(v.abs().max()) for k, v in saved.items() if "lora_B" in k) > 0
    assert events[-1][0] == "save" and ("train", 2, 2) in events


def test_a_finished_step_is_replayed_and_a_different_batch_is_refused(trainer):
    request = batch(trainer, "once", 1)
    first = trainer.step(request, noop)
    again = trainer.step(request, noop)
    assert again["replayed"] is True and again["adapterHash"] == first["adapterHash"]
    assert again["optimizerSteps"] == first["optimizerSteps"] == 2
    with pytest.raises(StepError) as info:
        trainer.step(batch(trainer, "once", 1, rewards=(0.0, 1.0)), noop)
    assert info.value.status == 409 and info.value.code == "step_conflict"


def test_steps_apply_in_order_and_carry_the_optimiser_state(trainer):
    with pytest.raises(StepError) as info:
        trainer.step(batch(trainer, "order", 2), noop)
    assert info.value.code == "previous_step_missing"
    trainer.step(batch(trainer, "order", 1), noop)
    trainer._state_of = None  # force the reload from disk, as after a worker restart
    second = trainer.step(batch(trainer, "order", 2), noop)
    assert second["optimizerSteps"] == 4


def test_equal_rewards_are_a_reported_no_op(trainer):
    result = trainer.step(batch(trainer, "flat", 1, rewards=(0.5, 0.5)), noop)
    assert result["applied"] is False and result["noopReason"] == "zero_advantage"
    assert result["optimizerSteps"] == 0 and result["iterations"] == 0


def test_completion_logprobs_match_the_full_sequence_without_the_prompt_logits(trainer):
    from bridle_trainer.batch import ModelCall
    from bridle_trainer.trainer import collate, completion_logprobs

    calls = [
        (ModelCall(prompt_token_ids=PROMPT, completion_token_ids=GOOD, logprobs=[-1.0] * 3), 1.0),
        (ModelCall(prompt_token_ids=PROMPT[:3], completion_token_ids=BAD + GOOD, logprobs=[-2.0] * 6), -1.0),
    ]
    b = collate(calls, torch.device("cpu"))
    assert int(b["first"]) == 2
    with torch.no_grad():
        kept = completion_logprobs(trainer.lora.peft, b, b["attention"])
        full = token_logprobs(
            trainer.lora.peft(input_ids=b["ids"], attention_mask=b["attention"]).logits, b["ids"]
        )
    assert kept.shape == b["mask"].shape
    on = b["mask"].bool()
    torch.testing.assert_close(kept[on], full[:, 2:][on])
    assert b["old"][on].tolist() == [-1.0] * 3 + [-2.0] * 6
