"""Verdicts on a paper's claim from several seeds, shared by the claim checks of every family
(:mod:`.retrieval_claims`, :mod:`.pointing_claims`, :mod:`.phrase_detection_claims`).

A claim "A beats B" holds when the mean seed-by-seed difference A - B has the paper's sign
(positive) and at least half of the seeds agree; a claim "A barely changes B" holds when the mean
difference lies within a stated tolerance either way (:func:`negligible`). The per-seed differences
are part of every verdict. A claim one of whose runs was still gaining when its budget ended is
UNDECIDED, whatever the rule gives: that run's figure is a lower bound.
"""
import math
from typing import Dict, List, Sequence

import numpy as np

__all__ = ["mean_sd", "difference", "holds", "verdict", "negligible", "cell", "signed"]


def mean_sd(values: Sequence[float]) -> tuple:
    """Mean and sample standard deviation (NaN for one value)."""
    values = [float(v) for v in values]
    return float(np.mean(values)), (float(np.std(values, ddof=1)) if len(values) > 1 else math.nan)


def difference(runs: Dict[str, List[dict]], a: str, b: str, key: str) -> List[float]:
    """Seed by seed, ``runs[a][s][key] - runs[b][s][key]`` (runs of the same seeds, in order)."""
    if len(runs[a]) != len(runs[b]):
        raise ValueError(f"{a} has {len(runs[a])} runs and {b} {len(runs[b])}: compare the same seeds")
    return [x[key] - y[key] for x, y in zip(runs[a], runs[b])]


def signed(value: float) -> str:
    """A difference with its sign and one decimal, or two where one would print a non-zero difference
    as "+0.0" or "-0.0" (the rule counts +0.02 as a gain: the text must show it is one)."""
    text = f"{value:+.1f}"
    return f"{value:+.2f}" if value != 0 and float(text) == 0 else text


def holds(diffs: List[float]) -> bool:
    """Positive mean and at least half of the seeds positive."""
    return float(np.mean(diffs)) > 0 and sum(d > 0 for d in diffs) * 2 >= len(diffs)


def _outcome(ok: bool, unsettled: Sequence[str]) -> tuple:
    """(``holds`` value, its words): None and UNDECIDED when runs of the claim were still gaining."""
    if unsettled:
        return None, (f"UNDECIDED (the rule alone: {'holds' if ok else 'does not hold'}; still gaining when "
                      f"the budget ended: {', '.join(unsettled)})")
    return ok, "HOLDS" if ok else "DOES NOT HOLD"


def verdict(title: str, paper: str, diffs: List[float], unit: str, extra: str = "",
            unsettled: Sequence[str] = ()) -> dict:
    """``{"claim", "holds", "mean", "per_seed", "text"}`` for the seed-by-seed differences ``diffs``
    (in ``unit``, e.g. ``"rsum"``) of a claim whose paper figure is ``paper``. ``unsettled`` names
    the compared runs still gaining when their budget ended
    (:func:`~phrasedet.utils.learning_curves.still_gaining`): then ``holds`` is None and the text
    says UNDECIDED, and what the rule alone gives."""
    ok, words = _outcome(holds(diffs), unsettled)
    won = sum(d > 0 for d in diffs)
    seeds = ", ".join(signed(d) for d in diffs)
    text = (f"{title}: {words} here: mean {signed(np.mean(diffs))} {unit}, "
            f"{won}/{len(diffs)} seeds ({seeds}){extra}; paper {paper}.")
    return {"claim": title, "holds": ok, "mean": float(np.mean(diffs)), "per_seed": diffs, "text": text}


def negligible(title: str, paper: str, diffs: List[float], unit: str, tolerance: float, extra: str = "",
               unsettled: Sequence[str] = ()) -> dict:
    """The verdict of "A barely changes B": it holds when the mean of the seed-by-seed differences
    ``diffs`` lies within ``tolerance`` (in ``unit``) either way. Same keys and ``unsettled`` as
    :func:`verdict`."""
    mean = float(np.mean(diffs))
    within = abs(mean) <= tolerance
    ok, words = _outcome(within, unsettled)
    seeds = ", ".join(signed(d) for d in diffs)
    text = (f"{title}: {words} here: mean {signed(mean)} {unit} "
            f"({'within' if within else 'beyond'} +/-{tolerance:g}), seeds {seeds}{extra}; paper {paper}.")
    return {"claim": title, "holds": ok, "mean": mean, "per_seed": diffs, "text": text}


def cell(values: Sequence[float]) -> str:
    """``"mean ± sd"`` with one decimal (``"mean"`` for one value)."""
    mean, sd = mean_sd(values)
    return f"{mean:.1f}" if math.isnan(sd) else f"{mean:.1f} ± {sd:.1f}"
