"""Why do DSVE-loc's hardest negatives not train from a cold start? The study of issue 43
(``tools/compare/compare_pointing.py --study cold_start``; docs/POINTING.md).

With the hardest in-batch negative (VSE++'s max of hinges, paper 004 Eq. 7), a freshly initialized
embedding can stay where every score is equal: each image and caption then costs its hinge twice,
``2 x margin``, summed over the batch as the released code sums it, and the gradient of a max
reaches one negative only. Each variant here changes one thing of ``configs/pointing/dsve_loc.yaml``
(the hardest negatives, cold start) and runs on the comparison's budget:

* ``warmup_half_gain``: the sum over negatives first, then the hardest. The warm-up ends where the
  sum alone (the comparison's ``dsve_loc_sum`` runs, every seed recorded) has left its starting
  plateau and made half of its gain (:func:`~phrasedet.utils.learning_curves.half_gain_iteration`
  of their mean validation curve);
* ``batch160``: the paper's batch of 160 images;
* ``paper_lr``: the paper's learning rate, Adam at 1e-3 halved at the end of epochs 2 to 6 (the
  released code's milestones), epochs of the built-in training split;
* ``gru``: a GRU text path instead of the SRU;
* ``no_pooled_dropout``: no dropout on the pooled image vector.

A run has left the plateau when its best validation rsum reaches the level at which the sum's
mean curve had made half of its gain (:func:`~phrasedet.utils.learning_curves.half_gain`; 302 on
the CNN's records): the same level that ends the warm-up. Its training loss is reported beside it
(:func:`all_equal_ratio`, its share of the loss with every score equal) but decides nothing: a
hardest-negative hinge stays near the margin whenever the hardest negative is nearly as close as
the positive, trained or not (measured: the warm-up variant's loss is 1.02 times the all-equal
value at iteration 1,800 while its validation rsum is 430; VSE++'s, on pooled features, 0.37).
"""
from typing import Dict, List, Sequence

import numpy as np

from phrasedet.utils.learning_curves import read_curve

__all__ = ["VARIANTS", "variant_opts", "paper_lr_steps", "all_equal_ratio", "format_study"]

VARIANTS = ("warmup_half_gain", "batch160", "paper_lr", "gru", "no_pooled_dropout")
PAPER_LR, PAPER_BATCH, PAPER_HALVINGS = 1e-3, 160, (2, 3, 4, 5, 6)  # paper 004 and its released train.py


def paper_lr_steps(num_images: int, batch: int) -> List[int]:
    """The iterations that end epochs 2 to 6 (the released code's halving milestones) of a
    training split of ``num_images`` with batches of ``batch``."""
    return [int(round(e * num_images / batch)) for e in PAPER_HALVINGS]


def variant_opts(name: str, num_images: int, batch: int, warmup: int) -> List:
    """``KEY VALUE`` overrides of a variant on top of ``configs/pointing/dsve_loc.yaml`` (the
    warm-up variant on top of ``dsve_loc_warmup.yaml``, ``warmup`` iterations long)."""
    if name == "warmup_half_gain":
        return ["MODEL.RETRIEVAL.LOSS.WARMUP_ALL_NEGATIVES_ITERS", int(warmup)]
    if name == "batch160":
        return ["SOLVER.IMS_PER_BATCH", PAPER_BATCH]
    if name == "paper_lr":
        return ["SOLVER.BASE_LR", PAPER_LR, "SOLVER.GAMMA", 0.5,
                "SOLVER.STEPS", str(tuple(paper_lr_steps(num_images, batch)))]
    if name == "gru":
        return ["MODEL.RETRIEVAL.RNN.TYPE", "gru"]
    if name == "no_pooled_dropout":
        return ["MODEL.RETRIEVAL.POOLED_DROPOUT", 0.0]
    raise KeyError(f"no cold-start variant {name!r} (known: {', '.join(VARIANTS)})")


def all_equal_ratio(metrics_file: str, margin: float, batch: int, last_share: float = 0.1) -> float:
    """The run's mean ``total_loss`` over the last ``last_share`` of its logged iterations, divided
    by the hardest-negative loss when every score is equal (``2 x margin x batch``): about 1 on the
    plateau, 0 once every positive beats its hardest negative by the margin."""
    curve = read_curve(metrics_file, "total_loss")
    if not curve:
        raise ValueError(f"{metrics_file}: no total_loss logged")
    last = curve[-1][0]
    tail = [v for i, v in curve if i >= (1 - last_share) * last]
    return float(np.mean(tail)) / (2.0 * margin * batch)


def format_study(rows: Dict[str, Sequence[dict]], level: float) -> str:
    """Markdown: per run (model, seed), the change, its best validation rsum and iteration, the
    test R@1s and pointing accuracy, the loss's share of the all-equal value, and whether it left
    the plateau (its best validation rsum at least ``level``). ``rows``: {model: [{"seed",
    "change", "best", "best_iteration", "i2t_R@1", "t2i_R@1", "pointing", "ratio"}]}."""
    lines = ["| model | seed | change | best val. rsum (iteration) | i2t R@1 | t2i R@1 | R@1 summed | pointing, strict "
             f"| loss / all-equal, last tenth | left the plateau (best val. rsum >= {level:.1f}) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for model, runs in rows.items():
        for r in runs:
            left = "yes" if r["best"] >= level else "no"
            lines.append(f"| {model} | {r['seed']} | {r['change']} | {r['best']:.1f} ({r['best_iteration']}) | "
                         f"{r['i2t_R@1']:.1f} | {r['t2i_R@1']:.1f} | {r['i2t_R@1'] + r['t2i_R@1']:.1f} | "
                         f"{r['pointing']:.1f} | {r['ratio']:.3f} | {left} |")
    return "\n".join(lines)
