"""Do paper 004's claims hold on one's own runs? Verdicts from DSVE-loc and its two ablations,
trained with the same budget and several seeds (``tools/compare/compare_pointing.py``).

Claims, with the paper's numbers (COCO; pointing game on Visual Genome regions of COCO val2014):

* DSVE-loc beats the centre baseline on the pointing game (Table 3: 33.8 % vs 19.5 %);
* WELDON pooling beats global average pooling: +1.1 pointing accuracy and, on retrieval,
  caption R@1 +5.3 and image R@1 +4.7 (Sec. 4.2);
* hard negatives beat the sum over negatives: caption R@1 +20.3 and image R@1 +16.3 (Sec. 4.2;
  the paper does not say whether these are absolute or relative points).

Two reference rows beside the paper's (:data:`REFERENCES`), the hardest negatives after a warm-up
with the sum (``dsve_loc_warmup``: VSE-infinity's one epoch; ``dsve_loc_warmup_plateau``: as long as
the sum needs to leave its plateau), are held to the first and third claims too. A claim one of
whose runs was still gaining when its budget ended is UNDECIDED (:mod:`.claims`).

Runs are ``{"pointing": {...}, "retrieval": {...}}`` per seed (:func:`split_results`). The
retrieval claims compare R@1 summed over both directions (image-to-text + text-to-image).
"""
import math
from typing import Dict, List

from .claims import cell, difference, verdict

__all__ = ["PAPER", "REFERENCES", "COLUMNS", "split_results", "claim_verdicts", "format_claims", "format_table", "r1_sum"]

# (key in the run, header): pointing accuracy and its centre baseline (%), then the recalls
COLUMNS = (("pointing", "accuracy", "pointing acc."), ("pointing", "centre_accuracy", "centre baseline"),
           ("retrieval", "i2t_R@1", "i2t R@1"), ("retrieval", "i2t_R@5", "i2t R@5"), ("retrieval", "i2t_R@10", "i2t R@10"),
           ("retrieval", "t2i_R@1", "t2i R@1"), ("retrieval", "t2i_R@5", "t2i R@5"), ("retrieval", "t2i_R@10", "t2i R@10"))
PAPER = {"dsve_loc": {"pointing": 33.8, "centre": 19.5, "i2t_R@1": 69.8, "t2i_R@1": 55.9}}


def split_results(results: dict) -> dict:
    """``train_net``'s results (one entry per test split, or the single split's metrics) ->
    ``{"pointing": metrics, "retrieval": metrics}``; an error names what is missing."""
    tasks = {}
    for value in results.values() if not ({"pointing", "retrieval"} & set(results)) else [results]:
        for task in ("pointing", "retrieval"):
            if task in value:
                tasks[task] = value[task]
    missing = {"pointing", "retrieval"} - set(tasks)
    if missing:
        raise KeyError(f"the run's results have no {sorted(missing)} metrics (test splits: {sorted(results)})")
    return tasks


def _column(runs: List[dict], task: str, key: str) -> List[float]:
    return [r[task][key] for r in runs]


def r1_sum(run: dict) -> float:
    """Image-to-text plus text-to-image R@1 of one run."""
    return run["retrieval"]["i2t_R@1"] + run["retrieval"]["t2i_R@1"]


def _flat(runs: Dict[str, List[dict]]) -> Dict[str, List[dict]]:
    """Per model, per seed: pointing accuracy, centre baseline and R@1 sum as one dict."""
    return {m: [{"point": r["pointing"]["accuracy"], "centre": r["pointing"]["centre_accuracy"], "r1": r1_sum(r)} for r in rs]
            for m, rs in runs.items()}


#: The reference rows (not paper 004's): the hardest negatives after a warm-up with the sum over
#: negatives, VSE-infinity's one epoch (10 iterations here) and one as long as the sum needs to leave
#: its own plateau (800 iterations, issue 43's cold-start study; docs/POINTING.md).
REFERENCES = {"dsve_loc_warmup": "VSE-infinity's one-epoch warm-up",
              "dsve_loc_warmup_plateau": "a warm-up until the sum has left its plateau"}


def claim_verdicts(runs: Dict[str, List[dict]], unsettled: Dict[str, List[str]] = None) -> List[dict]:
    """Verdicts of the claims whose runs are present (``dsve_loc``, ``dsve_loc_gap``, ``dsve_loc_sum``, and the
    reference rows of :data:`REFERENCES`). ``unsettled``: per model, its runs (e.g. ``"seed 2"``) still
    gaining when their budget ended
    (:func:`~phrasedet.engine.comparison.protocol.gaining_runs`); a claim comparing such a run is
    UNDECIDED (:func:`~.claims.verdict`)."""
    flat, out, unsettled = _flat(runs), [], unsettled or {}

    def gaining(*models):
        return [f"{m} {run}" for m in models for run in unsettled.get(m, ())]

    def above_centre(model, title, paper):
        diffs = [r["point"] - r["centre"] for r in flat[model]]
        return verdict(title, paper, diffs, "points of accuracy", unsettled=gaining(model))

    def beats(a, b, key, title, paper, unit):
        return verdict(title, paper, difference(flat, a, b, key), unit, unsettled=gaining(a, b))

    r1_unit = "R@1 (both directions summed)"
    if "dsve_loc" in flat:
        out.append(above_centre("dsve_loc", "004: DSVE-loc beats the centre baseline on the pointing game",
                                "+14.3 (33.8 vs 19.5 %)"))
    if {"dsve_loc", "dsve_loc_gap"} <= set(flat):
        out.append(beats("dsve_loc", "dsve_loc_gap", "point", "004: WELDON pooling beats average pooling on the pointing game",
                         "+1.1", "points of accuracy"))
        out.append(beats("dsve_loc", "dsve_loc_gap", "r1", "004: WELDON pooling beats average pooling on retrieval",
                         "+10.0 (caption R@1 +5.3, image R@1 +4.7)", r1_unit))
    if {"dsve_loc", "dsve_loc_sum"} <= set(flat):
        out.append(beats("dsve_loc", "dsve_loc_sum", "r1", "004: hard negatives beat the sum over negatives on retrieval",
                         "+36.6 (caption R@1 +20.3, image R@1 +16.3)", r1_unit))
    for model, label in REFERENCES.items():
        if model not in flat:
            continue
        out.append(above_centre(model, f"reference, 004 with {label}: DSVE-loc beats the centre baseline",
                                "+14.3 (004's claim, without the warm-up)"))
        if "dsve_loc_sum" in flat:
            out.append(beats(model, "dsve_loc_sum", "r1", f"reference, 004 with {label}: hard negatives beat the sum "
                             "over negatives on retrieval", "+36.6 (004's claim, without the warm-up)", r1_unit))
    return out


def format_claims(verdicts: List[dict]) -> str:
    return "\n".join(v["text"] for v in verdicts)


def format_table(runs: Dict[str, List[dict]], minutes: Dict[str, float]) -> str:
    """Markdown table: mean ± sample standard deviation over the seeds of each column, and the
    mean wall time of one run."""
    head = ["model"] + [h for _, _, h in COLUMNS] + ["minutes per run"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, rs in runs.items():
        cells = [cell(_column(rs, task, key)) for task, key, _ in COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells + [f"{minutes.get(name, math.nan):.1f}"]) + " |")
    return "\n".join(lines)
