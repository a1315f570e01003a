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


def policy_logprobs(trainer, completion) -> list[float]:
    ids = torch.tensor([PROMPT + completion])
    with torch.no_grad():
        lps = token_logprobs(trainer.lora.peft(input_ids=ids).logits, ids)
    return [min(float(x), 0.0) for x in lps[0, len(PROMPT) - 1 :]]


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


def test_bf16_matmuls_learn_in_the_same_direction(trainer):
    trainer.autocast = True  # what --precision bf16 sets: bf16 matmuls over fp32 master weights
    try:
        gap_before = sequence_logprob(trainer, GOOD) - sequence_logprob(trainer, BAD)
        result = trainer.step(batch(trainer, "learn-bf16", 1), noop)
        gap_after = sequence_logprob(trainer, GOOD) - sequence_logprob(trainer, BAD)
    finally:
        trainer.autocast = False
    assert result["applied"] is True
    assert gap_after > gap_before + 0.1
    assert result["logprobDiff"] < 0.1  # bf16 scoring stays close to the sampling logprobs


def test_an_unknown_precision_is_refused_before_the_model_loads(tmp_path):
    from bridle_trainer.trainer import Trainer

    with pytest.raises(ValueError, match="precision must be fp32 or bf16, not 'fp16'"):
        Trainer(tmp_path / "no-model", tmp_path, "cpu", "fp16")


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
    # The adapter has moved off the base: its KL to the base is measured and reported, with no KL
    # term in the loss (klCoef 0, the default).
    assert second["kl"] > 0


def test_a_step_without_rollouts_is_a_recorded_no_op_the_next_step_follows(trainer):
    # Every rollout of step 2 failed (the model server was down): the step is kept, unchanged.
    first = trainer.step(batch(trainer, "gap", 1), noop)
    empty = trainer.step({"run": "gap", "step": 2, "config": CONFIG, "trajectories": []}, noop)
    assert empty["applied"] is False and empty["noopReason"] == "empty_batch"
    assert empty["adapterHash"] == first["adapterHash"]
    assert empty["optimizerSteps"] == first["optimizerSteps"]
    trainer._state_of = None  # the next step starts from the record on disk, as after a restart
    third = trainer.step(batch(trainer, "gap", 3), noop)
    assert third["applied"] is True and third["optimizerSteps"] == first["optimizerSteps"] + 2


def test_a_run_started_from_another_runs_adapter_continues_its_weights(trainer):
    parent = trainer.step(batch(trainer, "parent", 1), noop)
    assert parent["baseModel"] == "smollm2-135m-instruct" and parent["parent"] is None
    gap_parent = sequence_logprob(trainer, GOOD) - sequence_logprob(trainer, BAD)
    trainer.lora.fresh(_cfg())  # memory forgets the parent: the child must read it from disk
    ref = {"run": "parent", "step": 1, "hash": parent["adapterHash"]}
    # Equal rewards: a no-op step, so its saved adapter is exactly the weights it started from.
    child = trainer.step({**batch(trainer, "child", 1, rewards=(0.5, 0.5)), "parent": ref}, noop)
    assert child["applied"] is False and child["parent"] == ref
    assert child["adapterHash"] == parent["adapterHash"]
    assert sequence_logprob(trainer, GOOD) - sequence_logprob(trainer, BAD) == pytest.approx(gap_parent)
    # Trained further, it moves on from the parent's weights with an optimiser of its own.
    request = batch(trainer, "child", 2, rewards=(0.0, 1.0))
    for trajectory, completion in zip(request["trajectories"], (GOOD, BAD), strict=True):
        trajectory["calls"][0]["logprobs"] = policy_logprobs(trainer, completion)  # sampled from the parent
    second = trainer.step(request, noop)
    assert second["applied"] is True and second["optimizerSteps"] == 2
    assert second["adapterHash"] != parent["adapterHash"]
    assert second["kl"] > 0  # measured from its first step: it starts off the base model


def test_a_parent_that_is_missing_other_content_or_of_another_base_model_is_refused(trainer):
    parent = trainer.step(batch(trainer, "origin", 1), noop)
    cases = [
        ({"run": "nowhere", "step": 1, "hash": parent["adapterHash"]}, "parent_not_found"),
        ({"run": "origin", "step": 1, "hash": "0" * 64}, "parent_mismatch"),
    ]
    for ref, code in cases:
        with pytest.raises(StepError) as info:
            trainer.step({**batch(trainer, f"from-{code}", 1), "parent": ref}, noop)
        assert info.value.code == code
    ref = {"run": "origin", "step": 1, "hash": parent["adapterHash"]}
    trainer.base_model = "qwen2.5-coder-0.5b-instruct"  # as a trainer holding another base model
    try:
        with pytest.raises(StepError) as info:
            trainer.step({**batch(trainer, "elsewhere", 1), "parent": ref}, noop)
    finally:
        trainer.base_model = "smollm2-135m-instruct"
    assert info.value.status == 409 and info.value.code == "base_model_mismatch"
    assert "trained on smollm2-135m-instruct" in info.value.message
    assert "this trainer holds qwen2.5-coder-0.5b-instruct" in info.value.message
    with pytest.raises(StepError) as info:
        trainer.step({**batch(trainer, "late", 1), "step": 2, "parent": ref}, noop)
    assert info.value.code == "invalid_batch" and info.value.message.startswith("parent:")


def test_equal_rewards_are_a_reported_no_op(trainer):
    result = trainer.step(batch(trainer, "flat", 1, rewards=(0.5, 0.5)), noop)
    assert result["applied"] is False and result["noopReason"] == "zero_advantage"
    assert result["optimizerSteps"] == 0 and result["iterations"] == 0


def _logprobs_of(trainer, items, min_shared=0):
    """Scored logprobs of each item, in item order, through the prefix groups' passes."""
    from bridle_trainer.prefix import PrefixGroup, prefix_groups, run_group
    from bridle_trainer.trainer import collate

    groups = prefix_groups(items, min_shared) if min_shared else [PrefixGroup(0, [it]) for it in items]
    out = {}
    for group in groups:
        for seq, _ in group.items:
            got: list[torch.Tensor] = []
            run_group(
                trainer.lora.peft,
                PrefixGroup(group.shared, [(seq, 0.0)]),
                lambda its: [collate(its, torch.device("cpu"))],
                1.0,
                trainer.precision,
                lambda b, new, got=got: got.append(new[b["mask"].bool()]),
                grad=False,
            )
            out[id(seq)] = got[0]
    return [out[id(seq)] for seq, _ in items], groups


def test_scored_logprobs_equal_the_full_computation_on_every_generated_token(trainer):
    from bridle_trainer.batch import ModelCall
    from bridle_trainer.prefix import PrefixGroup, run_group
    from bridle_trainer.sequences import merge_calls
    from bridle_trainer.trainer import collate

    one = merge_calls([ModelCall(PROMPT, GOOD, [-1.0] * 3)])[0]
    two = merge_calls([ModelCall(PROMPT[:3], BAD + GOOD, [-2.0] * 6)])[0]
    b = collate([(one, 1.0), (two, -1.0)], torch.device("cpu"))
    assert b["keep"].tolist() == list(range(2, 8))  # no logits for the prompt positions before
    for temperature in (1.0, 0.7):
        got = []
        with torch.no_grad():
            run_group(
                trainer.lora.peft,
                PrefixGroup(0, [(one, 1.0), (two, -1.0)]),
                lambda _items: [b],
                temperature,
                trainer.precision,
                lambda _b, new, got=got: got.append(new),
                grad=False,
            )
            logits = trainer.lora.peft(input_ids=b["ids"], attention_mask=b["attention"]).logits
            full = token_logprobs(logits / temperature, b["ids"])
        kept = got[0]
        assert kept.shape == b["mask"].shape
        on = b["mask"].bool()
        torch.testing.assert_close(kept[on], full[:, 2:8][on])
    assert b["old"][on].tolist() == [-1.0] * 3 + [-2.0] * 6


SYSTEM = [1, 504, 3575, 282, 4649, 314, 7042, 30, 198, 1345, 2000, 42, 11, 12]


def _shared_items():
    """Three calls of one task: the same system prompt and task, different turns after it."""
    from bridle_trainer.batch import ModelCall
    from bridle_trainer.sequences import merge_calls

    calls = [
        ModelCall([*SYSTEM, 5, 6], [7, 8, 9], [-1.0] * 3),
        ModelCall([*SYSTEM, 5, 6, 7, 8, 9, 44, 45], [10, 11], [-1.0] * 2),
        ModelCall([*SYSTEM, 88], [3, 4, 5, 6], [-1.0] * 4),
    ]
    return [(merge_calls([c])[0], adv) for c, adv in zip(calls, (1.0, -0.5, 0.5), strict=True)]


def test_a_shared_prompt_prefix_runs_once_and_changes_no_logprob(trainer):
    items = _shared_items()
    plain, _ = _logprobs_of(trainer, items)
    shared, groups = _logprobs_of(trainer, items, min_shared=4)
    assert [g.shared for g in groups] == [len(SYSTEM)]  # one group, the whole common prompt
    for a, b in zip(plain, shared, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def _run_groups(trainer, groups, on_batch, grad, **options):
    """Runs each group's passes as the trainer does, with micro-batches of two rows."""
    from bridle_trainer.prefix import run_group
    from bridle_trainer.trainer import collate, micro_batches

    for group in groups:
        run_group(
            trainer.lora.peft,
            group,
            lambda its: [collate(c, torch.device("cpu")) for c in micro_batches(its, 2, 4096)],
            0.8,
            trainer.precision,
            on_batch,
            grad=grad,
            **options,
        )


def test_a_shared_prompt_prefix_gives_the_same_gradients(trainer):
    from bridle_trainer.prefix import PrefixGroup, prefix_chunks, prefix_groups

    torch.manual_seed(3)
    with torch.no_grad():  # a trained adapter: every LoRA matrix gets a gradient
        for p in trainer.lora.trainable():
            p.add_(0.02 * torch.randn_like(p))
    items = _shared_items()

    chunks_run = []

    def grads(groups, prefix_chunk=256):
        for p in trainer.lora.trainable():
            p.grad = None
        chunks_run.clear()
        _run_groups(
            trainer,
            groups,
            lambda b, new: -(new * b["mask"] * b["advantages"][:, None]).sum(),
            True,
            prefix_chunk=prefix_chunk,
            on_chunk=lambda: chunks_run.append(1),
        )
        return [p.grad.clone() for p in trainer.lora.trainable()]

    plain = grads([PrefixGroup(0, [it]) for it in items])
    assert any(float(g.abs().sum()) > 0 for g in plain)
    # One chunk, then the prefix's backward in chunks of 4 and 5 tokens (14 = 4 + 4 + 4 + 2, 5 + 5 + 4):
    # the same gradient up to float32 summation order (the cached path runs other attention kernels).
    # Each chunk of the prefix's backward is reported (the step's progress counts them).
    assert chunks_run == []
    for chunk, count in ((256, 1), (4, 4), (5, 3)):
        groups = prefix_groups(items, 4)
        shared = grads(groups, prefix_chunk=chunk)
        for a, b in zip(plain, shared, strict=True):
            assert float((a - b).norm() / a.norm().clamp_min(1e-12)) < 1e-3, f"prefix chunk {chunk}"
        assert len(chunks_run) == count == sum(prefix_chunks(g, chunk) for g in groups)


def test_prefix_groups_never_share_a_scored_position():
    from bridle_trainer.prefix import prefix_groups
    from bridle_trainer.sequences import Sequence

    a = Sequence(ids=[1, 2, 3, 4, 5], generated=[False, False, False, True, True], old=[0.0] * 5)
    b = Sequence(ids=[1, 2, 3, 4, 6], generated=[False, False, False, False, True], old=[0.0] * 5)
    lone = Sequence(ids=[9, 9, 9, 9], generated=[False, False, False, True], old=[0.0] * 4)
    groups = prefix_groups([(a, 1.0), (b, -1.0), (lone, 1.0)], min_shared=2)
    shared = {tuple(g.items[0][0].ids): (g.shared, len(g.items)) for g in groups}
    # a's first generated token is at 3: its logits come from position 2, so at most 2 are shared.
    assert shared[(1, 2, 3, 4, 5)] == (2, 2) or shared[(1, 2, 3, 4, 6)] == (2, 2)
    assert shared[(9, 9, 9, 9)] == (0, 1)  # alone: the plain path
    assert [g.shared for g in prefix_groups([(a, 1.0), (b, -1.0), (lone, 1.0)], min_shared=3)] == [0]


def test_calls_that_extend_each_other_train_as_one_sequence(trainer):
    from bridle_trainer.batch import ModelCall
    from bridle_trainer.sequences import merge_calls

    tool_result = [11, 12]
    first = ModelCall(PROMPT, GOOD, [-0.1, -0.2, -0.3])
    second = ModelCall(PROMPT + GOOD + tool_result, BAD, [-0.4, -0.5, -0.6])
    unrelated = ModelCall([9, 9, 9], [5], [-0.7])
    merged = merge_calls([first, second, unrelated])
    assert len(merged) == 2
    seq = merged[0]
    assert seq.ids == PROMPT + GOOD + tool_result + BAD
    assert [i for i, g in enumerate(seq.generated) if g] == [6, 7, 8, 11, 12, 13]
    assert [seq.old[i] for i, g in enumerate(seq.generated) if g] == [-0.1, -0.2, -0.3, -0.4, -0.5, -0.6]
    assert merged[1].ids == [9, 9, 9, 5]


def test_a_multi_turn_step_reports_how_far_the_trainer_is_from_the_sampling_logprobs(trainer):
    request = batch(trainer, "drift", 1)
    request["trajectories"][0]["calls"].append(
        {
            "promptTokenIds": PROMPT + GOOD + [11],
            "completionTokenIds": [42],
            "logprobs": [-50.0],  # far from what the model gives: the drift must show it
        }
    )
    result = trainer.step(request, noop)
    assert result["applied"] and result["calls"] == 3 and result["sequences"] == 2
    assert result["logprobDiff"] > 1.0
    assert result["kl"] == 0.0  # a fresh adapter is the base model


def test_a_long_suffix_still_shares_the_prefix_and_runs_alone_in_windows():
    # A shared group keeps its activations: a suffix of thousands of tokens would not fit a
    # micro-batch, so it runs alone, in windows, after the group's other suffixes.
    from bridle_trainer.prefix import prefix_groups, scored_windows, window_size, windows
    from bridle_trainer.sequences import Sequence

    def seq(tail: list[int]) -> Sequence:
        ids = [1, 2, 3, 4, *tail]
        return Sequence(ids=ids, generated=[False] * 4 + [True] * len(tail), old=[0.0] * len(ids))

    short_a, short_b, long = seq([5, 6]), seq([7, 8]), seq(list(range(10, 30)))
    groups = prefix_groups([(short_a, 1.0), (short_b, -1.0), (long, 1.0)], min_shared=2, max_suffix=8)
    assert [(g.shared, len(g.items), [len(s.ids) for s, _ in g.long]) for g in groups] == [(3, 2, [24])]
    # Without the bound all three are batched.
    assert [
        (g.shared, len(g.items), len(g.long))
        for g in prefix_groups([(short_a, 1.0), (short_b, -1.0), (long, 1.0)], 2)
    ] == [(3, 3, 0)]
    # A window scores the tokens its positions predict, the next window's first one included; a
    # window of tool results predicts nothing generated and only carries the gradient through.
    tool = Sequence(ids=list(range(12)), generated=[False] * 5 + [True] + [False] * 6, old=[0.0] * 12)
    assert windows(tool, 4) == [(0, 4, False), (4, 8, True), (8, 12, False)]
    assert scored_windows(groups[0], 8) == 3  # the 21-token suffix: 8 + 8 + 5, each scores
    # After a longer context a window is shorter: its attention's activations are kept.
    assert [window_size(n) for n in (3_000, 8_192, 20_740, 100_000)] == [512, 512, 202, 64]
    assert window_size(24, 8) == 8


def test_long_suffixes_in_windows_give_the_same_logprobs_and_gradients(trainer):
    from bridle_trainer.batch import ModelCall
    from bridle_trainer.prefix import PrefixGroup, prefix_groups, scored_windows
    from bridle_trainer.sequences import merge_calls

    torch.manual_seed(5)
    with torch.no_grad():  # a trained adapter: every LoRA matrix gets a gradient
        for p in trainer.lora.trainable():
            p.add_(0.02 * torch.randn_like(p))
    # One short call and two long ones of a task: earlier turns, a tool result, a second answer.
    tool_result = [300 + i for i in range(9)]
    calls = [
        ModelCall([*SYSTEM, 5, 6], [7, 8, 9], [-1.0] * 3),
        ModelCall([*SYSTEM, 5, 6, 7, 8, 9, *tool_result], [10, 11, 12, 13], [-1.0] * 4),
        ModelCall([*SYSTEM, 88, *tool_result, 41, 42], [3, 4, 5, 6, 7], [-1.0] * 5),
    ]
    items = [(merge_calls([c])[0], adv) for c, adv in zip(calls, (1.0, -0.5, 0.5), strict=True)]

    def run(groups, grad, window=4):
        for p in trainer.lora.trainable():
            p.grad = None
        seen = []

        def on_batch(b, new):
            seen.append(new[b["mask"].bool()].detach())
            return -(new * b["mask"] * b["advantages"][:, None]).sum()

        _run_groups(trainer, groups, on_batch, grad, prefix_chunk=5, window=window)
        grads = [p.grad.clone() for p in trainer.lora.trainable()] if grad else []
        return torch.cat(sorted(seen, key=lambda t: t.tolist())), seen, grads

    plain_lp, _, plain = run([PrefixGroup(0, [it]) for it in items], grad=True)
    groups = prefix_groups(items, 4, max_suffix=6)
    assert [(len(g.items), len(g.long)) for g in groups] == [(1, 2)]
    for window in (4, 7, 64):
        for grad in (False, True):
            lp, seen, shared = run(groups, grad, window)
            # Every scored token once, with the same logprob; one loss per scoring window.
            torch.testing.assert_close(lp.sort().values, plain_lp.sort().values, atol=2e-4, rtol=2e-4)
            assert len(seen) == 1 + scored_windows(groups[0], window)
            for a, b in zip(plain, shared if grad else plain, strict=True):
                assert float((a - b).norm() / a.norm().clamp_min(1e-12)) < 1e-3, f"window {window}"


def test_the_longer_the_shared_prefix_the_fewer_suffixes_per_micro_batch():
    # Every row keeps its own copy of the prefix's keys and values for the backward pass.
    from bridle_trainer.prefix import SHARED_BATCH_KEYS, shared_rows

    assert shared_rows(7_230, 130, 8) == 4  # OpenCode's prompt: four suffixes at a time
    assert shared_rows(18_740, 316, 8) == 1  # Claude Code's: one
    assert shared_rows(100_000, 10, 8) == 1  # never none
    assert shared_rows(100, 28, 8) == 8  # short prompts: the configured micro-batch
    for shared in (1_000, 7_230, 12_861, 18_740):
        rows = shared_rows(shared, 200, 8)
        assert rows == 1 or rows * (shared + 200) <= SHARED_BATCH_KEYS
