"""The zero-shot bucket split in two (issue 42): phrases with a word that no training phrase has
("vermilion circle") and phrases that are new combinations of known words ("purple star").

Paper 003 credits CCA initialization and word vectors with reaching unseen phrases through their
words. Only the first kind tests that, and in the long-tailed world the word vectors hardly know
those words (docs/DATA.md, "Do the word vectors tell a name's class?"). A run's zero-shot mAP is the
mean AP of its zero-shot phrases (``phrase_aps.json``, the evaluator's per-phrase file), so the two
parts below are a partition of it: their phrase-weighted mean is the run's ``mAP_zero_shot``.
"""
import math
from typing import Dict, List

from phrasedet.data.statistics import known_words

from .claims import cell

__all__ = ["known_words", "zero_shot_split", "format_zero_shot_split"]

PARTS = (("unseen_word", "a word unseen in training"), ("seen_words", "seen words only"))


def zero_shot_split(phrase_aps: List[dict], known: set) -> Dict[str, float]:
    """``{"unseen_word": mAP, "seen_words": mAP, "phrases_unseen_word": n, "phrases_seen_words": n}``
    over the zero-shot rows of ``phrase_aps`` (``{"phrase", "bucket", "ap"}`` each); a part
    without phrases has mAP NaN."""
    parts = {key: [] for key, _ in PARTS}
    for row in phrase_aps:
        if row["bucket"] == "zero_shot":
            parts["unseen_word" if set(row["phrase"].split()) - known else "seen_words"].append(float(row["ap"]))
    out = {}
    for key, aps in parts.items():
        out[key] = sum(aps) / len(aps) if aps else math.nan
        out[f"phrases_{key}"] = len(aps)
    return out


def format_zero_shot_split(runs: Dict[str, List[dict]]) -> str:
    """Markdown: per model, each part's mAP as mean ± sd over its seeds (``runs``: {model: [split
    per seed]}); the headers give each part's number of phrases (the same for every run of a split)."""
    first = next((r for rs in runs.values() for r in rs), None)
    if first is None:
        return "(no run)"
    lines = ["| model | " + " | ".join(f"zero-shot, {label} ({first[f'phrases_{key}']} phrases)" for key, label in PARTS) + " |",
             "|---|" + "---|" * len(PARTS)]
    for model, rs in runs.items():
        lines.append(f"| {model} | " + " | ".join(cell([r[key] for r in rs]) for key, _ in PARTS) + " |")
    return "\n".join(lines)
