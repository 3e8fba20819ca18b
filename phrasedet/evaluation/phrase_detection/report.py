"""Readable table of the phrase-detection metrics (percent)."""
from tabulate import tabulate

from phrasedet.text.vocab import BUCKETS

__all__ = ["format_results_table"]


def format_results_table(metrics: dict) -> str:
    """One row per bucket and one for the whole test set: phrases, test instances, mAP, loc acc.

    The "all" row's mAP is the mean of the bucket mAPs (the paper's overall number); its
    localization accuracy is over all instances.
    """
    rows = []
    for b in BUCKETS:
        rows.append([b, metrics[f"num_phrases_{b}"], metrics[f"num_instances_{b}"],
                     metrics[f"mAP_{b}"], metrics[f"loc_acc_{b}"]])
    rows.append(["all (mean of buckets)", sum(metrics[f"num_phrases_{b}"] for b in BUCKETS),
                 sum(metrics[f"num_instances_{b}"] for b in BUCKETS), metrics["mAP"], metrics["loc_acc"]])
    return tabulate(rows, headers=["bucket", "#phrases", "#instances", "mAP", "loc acc"],
                    tablefmt="pipe", floatfmt=".2f", numalign="right")
