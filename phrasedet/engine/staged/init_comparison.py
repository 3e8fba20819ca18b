"""Does CCA initialization beat random initialization? Paper 003's central finding (Table IV),
checked on one's own run: the same classifier trained twice on the same detector with the same
budget and seed, once CCA-initialized and once randomly initialized
(``PHRASEDET.RECIPE.COMPARE_RANDOM_INIT``), compared bucket by bucket.
"""
import math

from tabulate import tabulate

__all__ = ["CONVERGED_COMMAND", "PAPER_TABLE_IV", "as_preview", "compare_initializations", "format_comparison"]

# (metric key of the evaluator's results, column title)
METRICS = (("mAP_zero_shot", "zero-shot"), ("mAP_few_shot", "few-shot"), ("mAP_common", "common"),
           ("mAP", "overall"), ("loc_acc", "loc. acc."))
BUCKETS = METRICS[:3]

# Paper 003, Table IV(a) and (b), Flickr30K Entities: zero / few / common / overall mAP.
PAPER_TABLE_IV = {
    "CITEClassifier": {"random": (4.6, 4.7, 8.8, 6.0), "cca": (9.6, 11.5, 17.1, 12.7)},
    "EmbeddingNetClassifier": {"random": (3.1, 4.0, 9.1, 5.4), "cca": (9.2, 10.3, 17.2, 12.3)},
}


def _signed(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:+.2f}"


def _description(diff: dict) -> str:
    """What the differences (CCA init minus random init) per metric are, bucket by bucket."""
    won = [title for key, title in BUCKETS if diff[key] > 0]
    lost = [title for key, title in BUCKETS if not diff[key] > 0]  # NaN (an empty bucket) is not a win

    def listing(titles):
        return " and ".join(f"{t} ({_signed(diff[k])})" for k, t in BUCKETS if t in titles)

    parts = []
    if won:
        parts.append(f"beat random initialization on {listing(won)} phrases")
    if lost:
        parts.append(f"{'did not beat it' if won else 'did not beat random initialization'} on {listing(lost)}")
    return f"CCA initialization {', '.join(parts)}; overall {_signed(diff['mAP'])} mAP."


def _verdict(diff: dict) -> str:
    """The description and, from it, whether paper 003's central finding is reproduced."""
    rare_won = diff["mAP_zero_shot"] > 0 and diff["mAP_few_shot"] > 0
    if rare_won and diff["mAP"] > 0:
        outcome = "REPRODUCED (better overall and on zero- and few-shot phrases)"
    elif rare_won:
        outcome = "PARTLY REPRODUCED (better on zero- and few-shot phrases, not overall)"
    else:
        outcome = "NOT REPRODUCED (not better on both zero- and few-shot phrases)"
    return (f"{_description(diff)} Paper 003's central finding, CCA initialization beating random initialization most "
            f"of all on zero- and few-shot phrases, is {outcome}.")


def compare_initializations(cca: dict, random: dict, classifier: str = "") -> dict:
    """Compare two evaluations (the evaluator's ``results["phrase_detection"]`` dicts).

    Returns ``{"cca_init": {...}, "random_init": {...}, "cca_minus_random": {...}, "verdict": str,
    "paper": {...} or None}`` over the keys of :data:`METRICS`. A metric that is NaN in either run
    (an empty bucket) gives a NaN difference and counts as not beaten.
    """
    keys = [key for key, _ in METRICS]
    missing = [k for k in keys if k not in cca or k not in random]
    if missing:
        raise KeyError(f"phrase-detection results lack {missing}: both runs must be evaluated by PhraseDetectionEvaluator")
    diff = {k: cca[k] - random[k] for k in keys}
    paper = PAPER_TABLE_IV.get(classifier)
    return {
        "cca_init": {k: cca[k] for k in keys},
        "random_init": {k: random[k] for k in keys},
        "cca_minus_random": diff,
        "verdict": _verdict(diff),
        "paper": None if paper is None else {"classifier": classifier, **paper},
    }


#: The command that prints the converged comparison of CITE's initializations from the project's records.
CONVERGED_COMMAND = ("python tools/compare/compare_recipes.py --records-only --record-root results/phrase_detection_compare "
                     "--word-vectors results/word_vectors/builtin_word2vec.bin --detectors 0 1 --filter-weights none "
                     "--models cite_cca cite")


def as_preview(comparison: dict, iterations: int) -> dict:
    """The comparison of a preview run (``PHRASEDET.RECIPE.PREVIEW``): ``"preview": True``, and a
    verdict that says the run decides nothing (its differences, without calling the finding reproduced or
    not) and names the command whose converged runs do."""
    return {**comparison, "preview": True, "verdict": (
        f"PREVIEW ONLY, NOT A VERDICT: stage 3 stopped after {iterations} iterations, before the randomly initialized "
        f"classifier's validation curve flattens (the converged protocol: configs/cite_cca.yaml), so this run decides "
        f"nothing about paper 003's finding. This run alone: {_description(comparison['cca_minus_random'])} The converged comparison (3 "
        f"stage-3 seeds on each of 2 detectors, recorded in results/phrase_detection_compare) decides it: "
        f"{CONVERGED_COMMAND}")}


def _cells(values, signed=False):
    return ["-" if v is None else (_signed(v) if signed else ("n/a" if math.isnan(v) else f"{v:.2f}")) for v in values]


def format_comparison(comparison: dict) -> str:
    """The comparison as a table (CCA init, random init, difference; the paper's Table IV rows
    when known) followed by the verdict."""
    keys = [k for k, _ in METRICS]
    rows = [["CCA init"] + _cells(comparison["cca_init"][k] for k in keys),
            ["random init"] + _cells(comparison["random_init"][k] for k in keys),
            ["CCA - random"] + _cells((comparison["cca_minus_random"][k] for k in keys), signed=True)]
    paper = comparison.get("paper")
    if paper:
        rows.append(["paper 003, CCA init"] + _cells([*paper["cca"], None]))
        rows.append(["paper 003, random init"] + _cells([*paper["random"], None]))
        rows.append(["paper 003, CCA - random"] + _cells([*(c - r for c, r in zip(paper["cca"], paper["random"])), None], signed=True))
    table = tabulate(rows, headers=["mAP (%)"] + [title for _, title in METRICS], tablefmt="pipe", disable_numparse=True,
                     colalign=("left",) + ("right",) * len(METRICS))
    note = "\n(paper 003: Table IV, Flickr30K Entities)" if paper else ""
    return f"{table}{note}\n{comparison['verdict']}"
