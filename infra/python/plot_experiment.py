"""Plots of an experiment report (the JSON `bridle experiment` writes): learning curves per step and
held-out success of the base model and the adapter, overall and per category.

Usage: python plot_experiment.py <report.json> <out_prefix>
(writes <out_prefix>-curves.png and <out_prefix>-heldout.png)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def curves(report: dict[str, Any], out: Path) -> None:
    steps = report["curves"]
    x = [s["step"] for s in steps]
    panels = [
        ("meanReward", "mean reward"),
        ("successRate", "training success"),
        ("meanToolCalls", "tool calls per rollout"),
        ("loss", "GRPO loss"),
        ("kl", "KL to base"),
        ("logprobDiff", "|trainer - server| logprob"),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5))
    for ax, (key, title) in zip(axes.flat, panels, strict=True):
        y = [s.get(key) for s in steps]
        pts = [(a, b) for a, b in zip(x, y, strict=True) if b is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{report['model']} / {report['harness']}: training (seed {report['seed']})")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def held_out(report: dict[str, Any], out: Path) -> None:
    rows = [("overall", report["success"]["base"], report["success"]["adapter"])]
    rows += [(c["category"], c["base"], c["adapter"]) for c in report["categories"]]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.38
    for i, (_name, base, adapter) in enumerate(rows):
        ax.bar(i - width / 2, base or 0, width, color="#8c8c8c", label="base" if i == 0 else None)
        ax.bar(i + width / 2, adapter or 0, width, color="#2b7bba", label="adapter" if i == 0 else None)
    lo, hi = report["success"]["ci95"]
    ax.set_xticks(range(len(rows)), [r[0] for r in rows])
    ax.set_ylim(0, 1)
    ax.set_ylabel("held-out success rate")
    diff = report["success"]["diff"]
    ax.set_title(
        f"held-out: adapter - base = {fmt(diff)} (95% CI {fmt(lo)} .. {fmt(hi)}), "
        f"{report['heldOut']['tasks']} tasks x {report['heldOut']['attempts']}"
    )
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.2f}"


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit(__doc__)
    report = json.loads(Path(argv[0]).read_text())
    prefix = argv[1]
    curves(report, Path(f"{prefix}-curves.png"))
    held_out(report, Path(f"{prefix}-heldout.png"))
    print(f"{prefix}-curves.png {prefix}-heldout.png")


if __name__ == "__main__":
    main(sys.argv[1:])
