"""The paper's figures, redrawn from this run's outputs (PNG and PDF each).

A figure whose data this run did not produce (e.g. DPPO vs GRPO when every model was
trained with DPPO) is still written, with the reason printed in the figure and in
the log: the workflow's outputs stay the same set of files whatever the config, and
a reader of the report sees why a panel is empty rather than a missing file.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display on CI and cluster nodes

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from tmax.io import atomic_path
from tmax.report.stage import FIGURE_NAMES

log = logging.getLogger("tmax.report")

#: Training-curve panels: (metrics.jsonl key, axis label), as in the paper's figure.
CURVE_METRICS = (
    ("reward_mean", "reward"),
    ("response_tokens_mean", "response length (tokens)"),
    ("tool_calls_mean", "tool calls"),
    ("masked_fraction", "masked fraction"),
    ("logp_diff_mean", "log-prob difference, trainer vs engine"),
)
Curve = Sequence[Mapping[str, Any]]


def save(figure: Figure, stem: Path) -> list[Path]:
    """Write ``stem.png`` and ``stem.pdf`` atomically and close the figure."""
    paths = []
    for fmt in ("png", "pdf"):
        path = stem.with_suffix(f".{fmt}")
        with atomic_path(path) as tmp:
            figure.savefig(tmp, format=fmt, dpi=150, bbox_inches="tight")
        paths.append(path)
    plt.close(figure)
    return paths


def placeholder(title: str, reason: str) -> Figure:
    """A figure that says what is missing and why, instead of an empty plot."""
    log.info("figure %r has no data: %s", title, reason)
    figure, axis = plt.subplots(figsize=(6, 2.5))
    axis.set_axis_off()
    axis.set_title(title)
    axis.text(0.5, 0.5, f"Not produced by this run:\n{reason}", ha="center", va="center", wrap=True)
    return figure


def _series(curve: Curve, key: str) -> tuple[list[float], list[float]]:
    points = [(row["step"], row[key]) for row in curve if row.get(key) is not None]
    return [p[0] for p in points], [p[1] for p in points]


def smoothed(values: Sequence[float]) -> list[float]:
    """A centred moving average over a window of about a fifth of the run (at least 3
    steps, odd), shrinking at the ends: the trend of a reward that is noisy per step."""
    window = max(3, len(values) // 5) | 1
    half = window // 2
    out = []
    for index in range(len(values)):
        part = values[max(0, index - half) : index + half + 1]
        out.append(sum(part) / len(part))
    return out


def start_level(curve: Curve) -> float | None:
    """The mean reward of every episode the starting policy (version 0: the SFT model)
    played, over the steps that collected some; None if none is recorded."""
    rows = [r for r in curve if r.get("reward_start_policy_mean") is not None]
    episodes = sum(r["episodes_start_policy"] for r in rows)
    if episodes == 0:
        return None
    return sum(r["reward_start_policy_mean"] * r["episodes_start_policy"] for r in rows) / episodes


def training_curves(curves: Mapping[str, Curve], chosen: Mapping[str, int] | None = None) -> Figure:
    """One panel per training metric, one line per model (size); a dotted line marks the
    step checkpoint selection kept (``chosen``: model -> step, where it selected). The
    reward panel adds each model's smoothed reward (:func:`smoothed`) and, dashed, the
    level of its starting policy (:func:`start_level`)."""
    title = "RL training curves per model"
    if not any(curves.values()):
        return placeholder(title, "no model was trained with RL")
    chosen = chosen or {}
    figure, axes = plt.subplots(1, len(CURVE_METRICS), figsize=(4 * len(CURVE_METRICS), 3.2))
    for axis, (key, label) in zip(axes, CURVE_METRICS, strict=True):
        for model, curve in curves.items():
            steps, values = _series(curve, key)
            name = f"{model} (kept step {chosen[model]})" if model in chosen else model
            [line] = axis.plot(steps, values, marker="o", markersize=3, label=name)
            color = line.get_color()
            if model in chosen:
                axis.axvline(chosen[model], color=color, linestyle=":", linewidth=1)
            if key == "reward_mean" and len(values) >= 3:
                line.set_alpha(0.35)
                axis.plot(steps, smoothed(values), color=color, linewidth=2,
                          label=f"{model}, smoothed")  # fmt: skip
            level = start_level(curve) if key == "reward_mean" else None
            if level is not None:
                axis.axhline(level, color=color, linestyle="--", linewidth=1,
                             label=f"{model}, starting policy ({level:.2f})")  # fmt: skip
        axis.set_xlabel("step")
        axis.set_ylabel(label)
    axes[0].legend(fontsize="small")
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def compare_curves(
    curves: Mapping[str, Curve],
    setting: Mapping[str, Any],
    *,
    title: str,
    what: str,
    paper: str,
) -> Figure:
    """Reward curves of models trained with different values of one setting
    (``setting``: model -> value); a placeholder unless at least two values ran."""
    values = sorted({str(setting[m]) for m in curves if m in setting and curves[m]})
    if len(values) < 2:
        ran = ", ".join(values) or "none"
        return placeholder(title, f"every RL run used {what} = {ran}; the paper compares {paper}")
    figure, axis = plt.subplots(figsize=(5, 3.2))
    for model, curve in curves.items():
        steps, rewards = _series(curve, "reward_mean")
        axis.plot(
            steps, rewards, marker="o", markersize=3, label=f"{model} ({what}={setting.get(model)})"
        )
    axis.set_xlabel("step")
    axis.set_ylabel("reward")
    axis.legend(fontsize="small")
    axis.set_title(title)
    figure.tight_layout()
    return figure


def domain_distribution(counts: Mapping[str, int] | None, balance: float | None = None) -> Figure:
    """Tasks per domain; the title carries the balance exp(H)/N the paper reports."""
    title = "Tasks per domain" + ("" if balance is None else f" (exp(H)/N = {balance:.3f})")
    if not counts:
        return placeholder(title, "no task report")
    names = sorted(counts)
    figure, axis = plt.subplots(figsize=(6, 3.2))
    axis.barh(names, [counts[n] for n in names])
    axis.invert_yaxis()
    axis.set_xlabel("tasks")
    axis.set_title(title)
    figure.tight_layout()
    return figure


def contamination_overview(report: Mapping[str, Any] | None) -> Figure:
    """Share of tasks with an n-gram shared with each benchmark, per n."""
    title = "Contamination: tasks sharing an n-gram with a benchmark"
    rows = (report or {}).get("summary") or []
    if not rows:
        unchecked = sorted((report or {}).get("benchmarks", {}))
        reason = "no benchmark was loaded" + (f" ({', '.join(unchecked)})" if unchecked else "")
        return placeholder(title, reason)
    labels = [f"{r['benchmark']}\n{r['n']}-gram" for r in rows]
    figure, axis = plt.subplots(figsize=(max(4, 1.2 * len(rows)), 3.2))
    bars = axis.bar(labels, [r["tasks_flagged_pct"] for r in rows])
    axis.bar_label(bars, fmt="%.1f%%")
    axis.set_ylabel("tasks flagged (%)")
    axis.set_title(title)
    figure.tight_layout()
    return figure


def read_chosen_steps(selection_files: Mapping[str, Path]) -> dict[str, int]:
    """model -> the step checkpoint selection kept, for models that selected (a model
    whose selection.json says ``selected_on: null`` simply kept its last step)."""
    import json

    chosen = {}
    for model, path in selection_files.items():
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("selected_on"):
            chosen[model] = int(data["chosen_step"])
    return chosen


def read_curves(curve_files: Mapping[str, Path]) -> dict[str, list[dict[str, Any]]]:
    """model -> per-step metrics from each ``results/rl/<model>/curve.json``."""
    import json

    curves = {}
    for model, path in curve_files.items():
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        curves[model] = list(data.get("curve", []))
    return curves


def write_figures(
    out_dir: Path,
    *,
    curves: Mapping[str, Curve],
    rl_settings: Mapping[str, Mapping[str, Any]],
    domain_counts: Mapping[str, int] | None,
    decontam_report: Mapping[str, Any] | None,
    domain_balance: float | None = None,
    chosen_steps: Mapping[str, int] | None = None,
) -> list[Path]:
    """Every figure of :data:`FIGURE_NAMES` as ``out_dir/<name>.{png,pdf}``."""
    out_dir = Path(out_dir)
    figures = {
        "training_curves": training_curves(curves, chosen_steps),
        "dppo_vs_grpo": compare_curves(
            curves,
            {m: s.get("loss") for m, s in rl_settings.items()},
            title="DPPO vs GRPO",
            what="loss",
            paper="dppo and grpo",
        ),
        "group_size": compare_curves(
            curves,
            {m: s.get("group_size") for m, s in rl_settings.items()},
            title="Group size",
            what="group_size",
            paper="8 and 32",
        ),
        "domain_distribution": domain_distribution(domain_counts, domain_balance),
        "contamination": contamination_overview(decontam_report),
    }
    paths = []
    for name in FIGURE_NAMES:
        paths += save(figures[name], out_dir / name)
    return paths
