"""Validation learning curves of training runs (``PHRASEDET.SELECTION``'s periodic validation,
kept in each run's ``metrics.json``): reading them, the iteration where each one flattens, and
one picture per comparison.

A curve is a list of ``(iteration, value)``. It has *flattened* at the first validation from which
it never gains more than ``tolerance`` over its best so far: :func:`plateau_iteration`. The
comparison commands print this iteration for every model, and the budget of a comparison is chosen
from them (docs/RETRIEVAL.md, "The budget").
"""
import json
import os
from typing import Dict, List, Sequence, Tuple

import numpy as np

__all__ = ["read_curve", "join_phases", "plateau_iteration", "half_gain", "half_gain_iteration", "plot_curves", "format_plateaus"]

Curve = List[Tuple[int, float]]


def read_curve(metrics_file: str, key: str = "retrieval/rsum") -> Curve:
    """``(iteration, value)`` of every record of a Detectron2 ``metrics.json`` that has ``key``, in
    iteration order (a repeated iteration keeps its last record, as after ``--resume``).

    Raises:
        FileNotFoundError: naming the file.
        ValueError: naming the file and line of a record that is not JSON.
    """
    if not os.path.isfile(metrics_file):
        raise FileNotFoundError(f"{metrics_file}: no metrics file (was the run trained with PHRASEDET.SELECTION?)")
    points = {}
    with open(metrics_file, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{metrics_file}:{n}: not a JSON record ({e.msg})") from None
            if key in record:
                points[int(record["iteration"])] = float(record[key])
    return sorted(points.items())


def join_phases(phases: Sequence[Curve]) -> Curve:
    """One curve of a run trained in phases (paper 003's stage 3: Adam, then SGD from its best),
    each phase's iterations counted from 0: a later phase's points follow the earlier phase's last
    iteration (+1 per step). Empty phases are skipped."""
    out, offset = [], 0
    for curve in phases:
        if not curve:
            continue
        out += [(offset + i, v) for i, v in curve]
        offset = out[-1][0] + 1
    return out


def plateau_iteration(curve: Curve, tolerance: float) -> int:
    """The first iteration of ``curve`` after which no later value exceeds the best so far by more
    than ``tolerance`` (the last iteration when the curve still gains at its end); -1 for an empty
    curve."""
    if not curve:
        return -1
    values = np.array([v for _, v in curve])
    for k in range(len(curve) - 1):
        if values[k:].max() <= values[: k + 1].max() + tolerance:
            return int(curve[k][0])
    return int(curve[-1][0])  # nothing after the last point: it has flattened there at the latest


def half_gain(curves: Sequence[Curve]) -> Tuple[int, float]:
    """(iteration, level): the first iteration at which the mean of ``curves`` (over the iterations
    they all have) has made half of its gain, from its first value to its best, and that half-way
    level: where a curve that starts on a plateau has left it and is half-way up. (-1, NaN) when
    there is no common iteration."""
    curves = [c for c in curves if c]
    iters = sorted(set.intersection(*(set(i for i, _ in c) for c in curves))) if curves else []
    if not iters:
        return -1, float("nan")
    mean = np.array([[dict(c)[i] for i in iters] for c in curves]).mean(0)
    half = mean[0] + 0.5 * (mean.max() - mean[0])
    return int(iters[int(np.argmax(mean >= half))]), float(half)


def half_gain_iteration(curves: Sequence[Curve]) -> int:
    """The iteration of :func:`half_gain`; -1 when there is no common iteration."""
    return half_gain(curves)[0]


#: A run whose curve flattens only in this last share of its iterations is still gaining at its end.
LAST_SHARE = 0.1


def still_gaining(curve: Curve, tolerance: float, last_share: float = LAST_SHARE) -> bool:
    """Whether ``curve`` flattened (:func:`plateau_iteration`, within ``tolerance``) only in the
    last ``last_share`` of its iterations, its last point being the end of training: such a run's
    best value is a lower bound of what it would reach, and a comparison it is part of decides
    nothing. False for an empty curve."""
    if not curve:
        return False
    return plateau_iteration(curve, tolerance) > (1 - last_share) * curve[-1][0]


def plot_curves(curves: Dict[str, Sequence[Curve]], path: str, title: str, ylabel: str = "validation rsum") -> str:
    """One PNG: per model, the mean over its runs (seeds) at each validated iteration as a line,
    their minimum and maximum as a band. Returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=100)
    for name, runs in curves.items():
        runs = [r for r in runs if r]
        if not runs:
            continue
        iters = sorted(set.intersection(*(set(i for i, _ in r) for r in runs)))
        table = np.array([[dict(r)[i] for i in iters] for r in runs])
        line, = ax.plot(iters, table.mean(0), label=f"{name} ({len(runs)} run{'s' * (len(runs) > 1)})")
        if len(runs) > 1:
            ax.fill_between(iters, table.min(0), table.max(0), color=line.get_color(), alpha=0.15)
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def format_plateaus(curves: Dict[str, Sequence[Curve]], tolerance: float) -> str:
    """A markdown table: per model, each run's best value and iteration, and where it flattened."""
    lines = [f"| model | best validation value (iteration), per run | flattened at (within {tolerance:g}), per run |",
             "|---|---|---|"]
    for name, runs in curves.items():
        best = [max(r, key=lambda p: (p[1], -p[0])) if r else None for r in runs]
        cells = ", ".join(f"{b[1]:.1f} ({b[0]})" if b else "-" for b in best)
        flat = ", ".join(str(plateau_iteration(r, tolerance)) for r in runs)
        lines.append(f"| {name} | {cells} | {flat} |")
    return "\n".join(lines)
