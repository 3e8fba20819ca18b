"""Readable table of retrieval results (one row per protocol)."""
from typing import Dict

from tabulate import tabulate

from .metrics import DIRECTIONS, PER_DIRECTION

__all__ = ["format_retrieval_table"]

def _protocol_name(key: str) -> str:
    """``"retrieval"`` -> ``"all images"``, ``"retrieval_5fold"`` -> ``"5 folds (mean)"``."""
    return "all images" if key == "retrieval" else f"{key.rsplit('_', 1)[1][:-len('fold')]} folds (mean)"


def format_retrieval_table(results: Dict[str, Dict[str, float]]) -> str:
    """One row per protocol of ``results`` (``{"retrieval": metrics, "retrieval_<F>fold": ...}``):
    R@1, R@5, R@10 (%), median and mean rank of both directions (``i2t``: image queries, caption
    retrieval; ``t2i``: caption queries, image retrieval), and rsum."""
    columns = [(d, m) for d in DIRECTIONS for m in PER_DIRECTION]
    headers = ["protocol"] + [f"{d} {m}" for d, m in columns] + ["rsum"]
    rows = [[_protocol_name(key)] + [metrics[f"{d}_{m}"] for d, m in columns] + [metrics["rsum"]]
            for key, metrics in results.items()]
    return tabulate(rows, headers=headers, tablefmt="pipe", floatfmt=".2f", numalign="right")
