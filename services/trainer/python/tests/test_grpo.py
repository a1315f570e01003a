import torch

from bridle_trainer.batch import ModelCall, Trajectory
from bridle_trainer.grpo import group_advantages, grpo_loss


def traj(group: str, reward: float) -> Trajectory:
    return Trajectory(group, reward, [ModelCall([1], [2], [-1.0])])


def test_advantages_are_centred_per_group():
    advs = group_advantages([traj("a", 1), traj("a", 0), traj("b", 5), traj("b", 5)], scale_by_std=False)
    assert advs == [0.5, -0.5, 0.0, 0.0]


def test_std_scaling_gives_unit_advantages():
    advs = group_advantages([traj("a", 3), traj("a", 1)], scale_by_std=True)
    assert abs(advs[0] - 1.0) < 1e-4 and abs(advs[1] + 1.0) < 1e-4


def test_the_loss_pushes_up_positive_advantages_and_clips_far_ratios():
    new = torch.zeros(2, 1, requires_grad=True)
    old = torch.zeros(2, 1)
    parts = grpo_loss(new, old, torch.tensor([1.0, -1.0]), torch.ones(2, 1), 0.2, normaliser=2)
    parts.loss.backward()
    assert new.grad is not None
    assert new.grad[0, 0] < 0 < new.grad[1, 0]  # descending raises row 0, lowers row 1
    far = torch.tensor([[1.0]], requires_grad=True)  # ratio e > 1.2 with a positive advantage: clipped
    clipped = grpo_loss(far, torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1), 0.2, normaliser=1)
    clipped.loss.backward()
    assert far.grad is not None and far.grad.abs().sum() == 0 and clipped.clipped_tokens == 1


def test_kl_is_zero_at_the_reference_and_positive_elsewhere():
    ref = torch.zeros(1, 2)
    same = grpo_loss(
        ref.clone(), ref, torch.tensor([0.0]), torch.ones(1, 2), 0.2, 2, kl_coef=0.1, ref_logprobs=ref
    )
    moved = grpo_loss(
        torch.full((1, 2), -0.5),
        ref,
        torch.tensor([0.0]),
        torch.ones(1, 2),
        0.2,
        2,
        kl_coef=0.1,
        ref_logprobs=ref,
    )
    assert same.kl_sum == 0 and moved.kl_sum > 0
