"""Readable table of pointing-game results: one row per hit rule, with its exact test."""
from typing import Dict

from tabulate import tabulate

from .hit_rules import HIT_RULES, describe_rule, rule_key
from .metrics import PointingProtocol

__all__ = ["format_pointing_table", "pointing_title"]


def pointing_title(what: str, metrics: Dict[str, float], protocol: PointingProtocol) -> str:
    """The line above a table: ``what``, the counts and the protocol, e.g. ``Pointing game on
    vg_coco (865582 queries, 17471 images; hit rule strict (x1 < x < x2 and y1 < y < y2);
    tolerance 15 px), accuracy in %:``."""
    return (f"Pointing game on {what} ({metrics['num_queries']} queries, {metrics['num_images']} images; "
            f"{protocol.describe()}), accuracy in %:")


def format_pointing_table(metrics: Dict[str, float], protocol: PointingProtocol) -> str:
    """One row per rule: its key (the main one marked ``(main)``), its hit test in original-image
    pixels, the model's accuracy and the centre baseline's (percent)."""
    rows = []
    for rule in HIT_RULES:
        key = rule_key(rule, protocol.tolerance)
        name = f"{key} (main)" if key == protocol.key else key
        rows.append([name, describe_rule(rule, protocol.tolerance), metrics[f"accuracy_{key}"],
                     metrics[f"centre_accuracy_{key}"]])
    return tabulate(rows, headers=["hit rule", "hit test (original-image pixels)", "model", "centre baseline"],
                    tablefmt="pipe", floatfmt=".2f", numalign="right")
