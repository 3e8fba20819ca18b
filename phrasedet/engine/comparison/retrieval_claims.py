"""Do papers 002, 000 and 001's retrieval claims hold on one's own runs? Verdicts from the retrieval
metrics of several models trained with the same budget and several seeds
(``tools/compare/compare_retrieval.py``).

Claims, with the papers' numbers for reference (Flickr30K, R@1/5/10 both directions summed):

* 002, max of hinges beats the sum of hinges: VSE++ over VSE0 on rsum (Table 3, ResNet: 363.0 vs
  324.2, +38.8);
* 002, most with a fine-tuned image encoder: the gain of VSE++ over VSE0 is larger when the CNN is
  fine-tuned (Table 3, ResNet FT: 409.8 vs 367.8, +42.0; on COCO 1K +30.5 against +25.1);
* 000, the embedding network beats the similarity network on retrieval (Table 2: 360.0 vs 170.6;
  image-to-sentence R@1 43.2 vs 16.6);
* 000, the neighbourhood term: with neighbourhood sampling, adding the sentence-neighbourhood
  constraint changes rsum by +4.2 (Table 2b rows 5-6: 355.8 -> 360.0);
* 001, the instance loss trains a frozen-CNN model (stage I) far better than the ranking loss
  (Table 2, Flickr30K val, image-query R@1 39.9 vs 6.1);
* 001, instance loss + ranking loss (stage II) beats the ranking loss alone (Table 2: R@1 55.4 vs
  47.5 image query, 39.7 vs 29.0 text query), both trained in two stages with the same budget;
* 001, stage I helps: two stages beat one stage of instance + ranking loss from the start, with
  the same number of iterations (Sec. 5: stage I "can provide a good initialization for the
  ranking loss"; the paper gives no one-stage number);
* 001, position shift helps (Table 6, stage I: R@1 39.9 vs 34.1 image query, 28.2 vs 23.6 text
  query), compared after stage I as the paper does, and after stage II.

Two reference rows, beside the papers' and never in place of them, get a verdict too: VSE++ after
VSE-infinity's one-epoch warm-up with the sum of hinges (``vsepp_warmup``) against VSE0, and CLIP's
symmetric InfoNCE loss (``clip``) against VSE0.

A claim holds when the mean difference over the seeds has the paper's sign and at least half of
the seeds agree (:mod:`.claims`); the per-seed differences are part of every verdict.
"""
from typing import Dict, List

import numpy as np

from .claims import cell, difference as _difference, holds, mean_sd, verdict

__all__ = ["PAPER", "PAPER_001_CLAIMS", "RECALLS", "claim_verdicts", "difference", "format_claims", "format_seed_table", "mean_sd"]

RECALLS = ("i2t_R@1", "i2t_R@5", "i2t_R@10", "t2i_R@1", "t2i_R@5", "t2i_R@10")

# rsum and image-to-sentence R@1 of the papers' rows quoted above (Flickr30K)
PAPER = {
    "vse0": {"rsum": 324.2, "i2t_R@1": 36.6}, "vsepp": {"rsum": 363.0, "i2t_R@1": 43.7},
    "vse0_ft": {"rsum": 367.8, "i2t_R@1": 42.1}, "vsepp_ft": {"rsum": 409.8, "i2t_R@1": 52.9},
    "two_branch": {"rsum": 360.0, "i2t_R@1": 43.2}, "two_branch_no_nbr": {"rsum": 355.8, "i2t_R@1": 41.6},
    "similarity_net": {"rsum": 170.6, "i2t_R@1": 16.6},
    # paper 001, Flickr30K validation (Tables 2 and 6 give R@1 and R@10 only)
    "instance_loss": {"i2t_R@1": 55.4}, "ranking_only": {"i2t_R@1": 47.5}, "instance_loss_stage1": {"i2t_R@1": 39.9},
    "ranking_only_stage1": {"i2t_R@1": 6.1}, "no_shift_stage1": {"i2t_R@1": 34.1},
}

# (claim, model, baseline, the paper's figure), paper 001; each compares rsum, with both R@1 beside
PAPER_001_CLAIMS = (
    ("001: the instance loss beats the ranking loss with a frozen CNN (stage I)", "instance_loss_stage1",
     "ranking_only_stage1", "image-query R@1 +33.8 (39.9 vs 6.1), text-query +23.3 (Table 2)"),
    ("001: instance + ranking loss (stage II) beats the ranking loss alone", "instance_loss", "ranking_only",
     "image-query R@1 +7.9 (55.4 vs 47.5), text-query +10.7 (Table 2)"),
    ("001: stage I helps (two stages beat one stage with the same iterations)", "instance_loss", "one_stage",
     "no number (Sec. 5: stage I gives the ranking loss a good initialization)"),
    ("001: position shift helps (stage I)", "instance_loss_stage1", "no_shift_stage1",
     "image-query R@1 +5.8 (39.9 vs 34.1), text-query +4.6 (Table 6, stage I)"),
    ("001: position shift helps (after stage II)", "instance_loss", "no_shift", "not measured (Table 6 is stage I)"),
)


def difference(runs: Dict[str, List[dict]], a: str, b: str, key: str = "rsum") -> List[float]:
    """Seed by seed, ``runs[a][s][key] - runs[b][s][key]``."""
    return _difference(runs, a, b, key)


def _verdict(title: str, paper: str, diffs: List[float], extra: str = "") -> dict:
    return verdict(title, paper, diffs, "rsum", extra)


def _gain_verdict(tuned: List[float], frozen: List[float], gap: List[float]) -> dict:
    """A larger gain with fine-tuning presupposes a gain: without one (max of hinges not beating the
    sum with the fine-tuned CNN), the claim does not hold whatever the gap."""
    title = "002: the gain of max over sum is larger with a fine-tuned CNN"
    extra = f" (gain fine-tuned {np.mean(tuned):+.1f}, frozen {np.mean(frozen):+.1f})"
    verdict = _verdict(title, "+3.2 (Flickr30K), +5.4 (COCO 1K)", gap, extra)
    if not holds(tuned):
        verdict["holds"] = False
        verdict["text"] = (f"{title}: DOES NOT HOLD here: there is no gain to compare, max of hinges loses to the sum "
                           f"with the fine-tuned CNN{extra}; paper +3.2 (Flickr30K), +5.4 (COCO 1K).")
    return verdict


def claim_verdicts(runs: Dict[str, List[dict]]) -> List[dict]:
    """The verdicts of the claims whose runs are present.

    Args:
        runs: model name (``vse0``, ``vsepp``, ``vse0_ft``, ``vsepp_ft``, ``vsepp_warmup``, ``clip``,
            ``two_branch``, ``two_branch_no_nbr``, ``similarity_net``, and paper 001's ``instance_loss``,
            ``ranking_only``, ``one_stage``, ``no_shift`` and the stage-I models
            ``<name>_stage1``) -> one retrieval-metrics dict per seed.
    """
    out = []
    if {"vse0", "vsepp"} <= set(runs):
        frozen = difference(runs, "vsepp", "vse0")
        out.append(_verdict("002: max of hinges (VSE++) beats the sum of hinges (VSE0), frozen CNN",
                            "+38.8 (Flickr30K, ResNet)", frozen))
        if {"vse0_ft", "vsepp_ft"} <= set(runs):
            tuned = difference(runs, "vsepp_ft", "vse0_ft")
            out.append(_verdict("002: max of hinges beats the sum of hinges, fine-tuned CNN", "+42.0 (Flickr30K, ResNet FT)", tuned))
            gap = [t - f for t, f in zip(tuned, frozen)]
            out.append(_gain_verdict(tuned, frozen, gap))
    if {"vse0", "vsepp_warmup"} <= set(runs):
        out.append(_verdict("reference, 002 with VSE-infinity's warm-up: max of hinges after one epoch of the sum beats "
                            "the sum of hinges, frozen CNN", "+38.8 (002's claim, without the warm-up)",
                            difference(runs, "vsepp_warmup", "vse0")))
    if {"vse0", "clip"} <= set(runs):
        out.append(_verdict("reference: CLIP's InfoNCE beats the sum of hinges (VSE0), frozen CNN",
                            "no number (in no paper here)", difference(runs, "clip", "vse0")))
    if {"two_branch", "similarity_net"} <= set(runs):
        r1 = difference(runs, "two_branch", "similarity_net", "i2t_R@1")
        out.append(_verdict("000: the embedding network beats the similarity network", "+189.4 (360.0 vs 170.6; I->S R@1 43.2 vs 16.6)",
                            difference(runs, "two_branch", "similarity_net"), f"; image->text R@1 {np.mean(r1):+.1f}"))
    if {"two_branch", "two_branch_no_nbr"} <= set(runs):
        out.append(_verdict("000: the sentence-neighbourhood term improves retrieval", "+4.2 (355.8 -> 360.0)",
                            difference(runs, "two_branch", "two_branch_no_nbr")))
    for title, model, baseline, paper in PAPER_001_CLAIMS:
        if {model, baseline} <= set(runs):
            r1 = [np.mean(difference(runs, model, baseline, f"{d}_R@1")) for d in ("i2t", "t2i")]
            out.append(_verdict(title, paper, difference(runs, model, baseline),
                                f"; R@1 image query {r1[0]:+.1f}, text query {r1[1]:+.1f}"))
    return out


def format_claims(verdicts: List[dict]) -> str:
    return "\n".join(v["text"] for v in verdicts)


def format_seed_table(runs: Dict[str, List[dict]], minutes: Dict[str, float]) -> str:
    """Markdown table: each model's recalls and rsum as mean ± sample standard deviation over the
    seeds, the paper's rsum and image-to-text R@1 (where it gives them) and the mean wall time of
    one run ("-" for a model without one, e.g. a stage-I model evaluated from a longer run)."""
    head = ["model"] + [k.replace("_", " ") for k in RECALLS] + ["rsum", "paper rsum", "paper i2t R@1", "minutes per run"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, metrics in runs.items():
        cells = [cell([m[k] for m in metrics]) for k in RECALLS + ("rsum",)]
        paper = PAPER.get(name, {})
        cells += [f"{paper[k]:.1f}" if k in paper else "-" for k in ("rsum", "i2t_R@1")]
        cells.append(f"{minutes[name]:.1f}" if name in minutes else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
