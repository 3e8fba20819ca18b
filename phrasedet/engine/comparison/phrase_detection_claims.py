"""Do paper 003's claims (Tables IV-VI) hold on one's own runs? Verdicts from every classifier of
Table IV trained on the same stage-1 detector with several stage-3 seeds
(``tools/compare/compare_recipes.py``), per detector.

Runs are the evaluator's ``phrase_detection`` metrics per seed (``mAP``, ``mAP_zero_shot``, ...,
``loc_acc``), under the model names of ``tools/compare/compare_recipes.py``: ``cite_cca``, ``cite``,
``embedding_net_cca``, ``embedding_net``, ``cca``, ``deep_cca``, ``qa_rcnn_staged``,
``qa_rcnn_npa``, and two evaluations of ``cite_cca``'s models: ``cite_cca_ppa`` (with
PPA-augmented positives, Table V) and ``cite_cca_filtered`` (with phrase filtering, Table VI).
A model trained nothing in stage 3 (``cca``) may have one run: it stands for every seed.

Claims (paper: Flickr30K Entities, overall mAP = mean of the three buckets):

* CCA initialization beats random initialization, CITE (Table IV: 12.7 vs 6.0) and the Embedding
  Network (12.3 vs 5.4);
* CITE with CCA initialization beats the frozen CCA (12.7 vs 12.2);
* Deep CCA stays below linear CCA (9.6 vs 12.2);
* NPA barely changes QA R-CNN (5.9 vs 5.7): it holds when the mean difference is within
  :data:`NEGLIGIBLE` mAP points either way (:func:`~.claims.negligible`);
* PPA-augmented positives raise CITE's mAP (Table V(a) 13.7 vs Table IV 12.7);
* phrase filtering raises CITE's mAP (Table VI: 13.7 -> 15.0).

"A beats B" holds when the mean seed-by-seed difference is positive and at least half of the
seeds agree (:mod:`.claims`).
"""
from typing import Dict, List

from .claims import cell, difference, negligible, signed, verdict

__all__ = ["BUCKETS", "COLUMNS", "NEGLIGIBLE", "PAPER", "claim_verdicts", "format_claims", "format_table", "format_under_oracle",
           "per_seed"]

#: (metric key, header) of the tables.
COLUMNS = (("mAP_zero_shot", "zero-shot"), ("mAP_few_shot", "few-shot"), ("mAP_common", "common"), ("mAP", "mAP"),
           ("loc_acc", "loc. acc."))
BUCKETS = COLUMNS[:3]
#: "Barely changes": a mean difference within this many mAP points (the paper's NPA: +0.2 and -0.2, against
#: differences of 3 to 7 points between the classifiers of Table IV).
NEGLIGIBLE = 1.0

# Table IV (Flickr30K Entities): zero-shot, few-shot, common, mean
PAPER = {"qa_rcnn_staged": (3.9, 4.3, 8.9, 5.7), "qa_rcnn_npa": (3.8, 4.1, 9.7, 5.9), "cca": (8.8, 10.7, 17.1, 12.2),
         "deep_cca": (6.4, 7.5, 14.9, 9.6), "embedding_net": (3.1, 4.0, 9.1, 5.4), "cite": (4.6, 4.7, 8.8, 6.0),
         "embedding_net_cca": (9.2, 10.3, 17.2, 12.3), "cite_cca": (9.6, 11.5, 17.1, 12.7),
         "cite_cca_filtered": (10.9, 13.1, 21.1, 15.0),
         # Table V(a): evaluated with PPA-augmented positives
         "cca_ppa": (8.9, 10.7, 18.9, 12.9), "embedding_net_cca_ppa": (8.7, 10.4, 19.6, 12.9),
         "cite_cca_ppa": (9.7, 11.8, 19.5, 13.7)}


def per_seed(runs: Dict[str, List[dict]], seeds: int) -> Dict[str, List[dict]]:
    """``runs`` with a single-run model repeated for each of ``seeds`` seeds (it trained nothing
    that a seed changes)."""
    return {m: (rs * seeds if len(rs) == 1 else rs) for m, rs in runs.items()}


def _buckets(runs, a, b) -> str:
    parts = [f"{title} {sum(difference(runs, a, b, key)) / len(runs[a]):+.2f}" for key, title in BUCKETS]
    return "; per bucket: " + ", ".join(parts)


def claim_verdicts(runs: Dict[str, List[dict]], unsettled: Dict[str, List[str]] = None) -> List[dict]:
    """The verdicts of the claims whose runs are present (see the module docstring). ``unsettled``:
    per trained model, its runs (e.g. ``"seed 2"``) still gaining when their budget ended; a claim
    comparing such a run is UNDECIDED (:func:`~.claims.verdict`)."""
    seeds = max(len(rs) for rs in runs.values()) if runs else 0
    runs, out = per_seed(runs, seeds), []
    have = set(runs)
    unsettled = unsettled or {}

    def still_gaining(a, b):  # a PPA or filtered row evaluates its model's runs: keyed by that model (its b)
        return [f"{m} {run}" for m in (a, b) for run in unsettled.get(m, ())]

    def _beats(runs, title, a, b, paper):
        return verdict(title, paper, difference(runs, a, b, "mAP"), "mAP", _buckets(runs, a, b), still_gaining(a, b))

    if {"cite_cca", "cite"} <= have:
        out.append(_beats(runs, "003: CCA initialization beats random initialization, CITE", "cite_cca", "cite",
                          "+6.7 (12.7 vs 6.0; zero-shot +5.0, few-shot +6.8, common +8.3)"))
    if {"embedding_net_cca", "embedding_net"} <= have:
        out.append(_beats(runs, "003: CCA initialization beats random initialization, Embedding Network", "embedding_net_cca",
                          "embedding_net", "+6.9 (12.3 vs 5.4)"))
    if {"cite_cca", "cca"} <= have:
        out.append(_beats(runs, "003: CITE with CCA initialization beats the frozen CCA", "cite_cca", "cca", "+0.5 (12.7 vs 12.2)"))
    if {"cca", "deep_cca"} <= have:
        out.append(_beats(runs, "003: Deep CCA stays below linear CCA", "cca", "deep_cca", "+2.6 (12.2 vs 9.6)"))
    if {"qa_rcnn_npa", "qa_rcnn_staged"} <= have:
        out.append(negligible("003: NPA barely changes QA R-CNN", "+0.2 (5.9 vs 5.7)",
                              difference(runs, "qa_rcnn_npa", "qa_rcnn_staged", "mAP"), "mAP", NEGLIGIBLE,
                              _buckets(runs, "qa_rcnn_npa", "qa_rcnn_staged"), still_gaining("qa_rcnn_npa", "qa_rcnn_staged")))
    if {"cite_cca_ppa", "cite_cca"} <= have:
        out.append(_beats(runs, "003: PPA-augmented positives raise CITE's mAP", "cite_cca_ppa", "cite_cca",
                          "+1.0 (Table V(a) 13.7 vs Table IV 12.7)"))
    if {"cite_cca_filtered", "cite_cca"} <= have:
        out.append(_beats(runs, "003: phrase filtering raises CITE's mAP", "cite_cca_filtered", "cite_cca",
                          "+1.3 (Table VI: 13.7 -> 15.0)"))
    return out


def format_claims(verdicts: List[dict]) -> str:
    return "\n".join(v["text"] for v in verdicts)


def format_under_oracle(plain: List[dict], oracle: List[dict]) -> str:
    """Each claim's mAP difference as tested (``plain``: :func:`claim_verdicts` of the runs) beside
    the same difference under the phrase-presence oracle (``oracle``: :func:`claim_verdicts` of the
    runs' oracle metrics), and what is left, the part due to detections of absent phrases. A
    diagnostic of where a difference comes from, not a verdict."""
    under = {v["claim"]: v for v in oracle}
    lines = []
    for v in plain:
        o = under.get(v["claim"])
        if o is not None:
            seeds = ", ".join(signed(d) for d in o["per_seed"])
            lines.append(f"{v['claim']}: {signed(v['mean'])} mAP as tested; {signed(o['mean'])} ({seeds}) under the presence "
                         f"oracle; {signed(v['mean'] - o['mean'])} from the detections of absent phrases")
    return "\n".join(lines)


def format_table(runs: Dict[str, List[dict]], minutes: Dict[str, float] = None) -> str:
    """Markdown table: each model's bucket mAPs, overall mAP and localization accuracy as mean ±
    sample standard deviation over its runs, the paper's mAP (Table IV, or V and VI for the PPA and
    filtering rows) and the mean minutes of one run ("-" where there is none)."""
    minutes = minutes or {}
    head = ["model", "runs"] + [h for _, h in COLUMNS] + ["paper mAP", "minutes per run"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, rs in runs.items():
        cells = [cell([r[key] for r in rs]) for key, _ in COLUMNS]
        paper = f"{PAPER[name][3]:.1f}" if name in PAPER else "-"
        spent = f"{minutes[name]:.1f}" if name in minutes else "-"
        lines.append(f"| {name} | {len(rs)} | " + " | ".join(cells) + f" | {paper} | {spent} |")
    return "\n".join(lines)
