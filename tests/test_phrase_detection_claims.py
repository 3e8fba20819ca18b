"""Paper 003's claims on one's own runs (phrasedet/engine/comparison/phrase_detection_claims.py): verdicts
and tables from hand-made runs whose differences are known."""
import pytest

from phrasedet.engine.comparison.claims import negligible
from phrasedet.engine.comparison.phrase_detection_claims import (NEGLIGIBLE, claim_verdicts, format_claims, format_table,
                                                                 format_under_oracle, per_seed)


def _m(zero, few, common, loc=70.0):
    return {"mAP_zero_shot": zero, "mAP_few_shot": few, "mAP_common": common, "mAP": (zero + few + common) / 3, "loc_acc": loc}


RUNS = {  # three seeds; cca and its single run
    "cite_cca": [_m(9.0, 15.0, 24.0), _m(7.0, 13.0, 26.0), _m(8.0, 14.0, 25.0)],
    "cite": [_m(4.0, 9.0, 29.0), _m(8.0, 10.0, 27.0), _m(9.0, 16.0, 26.0)],
    "cca": [_m(10.0, 17.0, 30.0)],
    "deep_cca": [_m(9.0, 16.0, 29.0), _m(11.0, 18.0, 31.0), _m(10.0, 17.0, 30.0)],
    "qa_rcnn_staged": [_m(3.0, 6.0, 9.0), _m(3.0, 6.0, 9.0), _m(3.0, 6.0, 9.0)],
    "qa_rcnn_npa": [_m(3.0, 6.0, 12.0), _m(3.0, 6.0, 9.0), _m(3.0, 6.0, 9.0)],  # overall +1, 0, 0: mean +1/3
}


def _by_claim(verdicts):
    return {v["claim"].split(": ", 1)[1]: v for v in verdicts}


def test_verdicts_seed_by_seed_with_a_single_cca_run_standing_for_every_seed():
    v = _by_claim(claim_verdicts(RUNS))
    cite = v["CCA initialization beats random initialization, CITE"]
    # overall: 16 - 14 = +2, 15.33 - 15 = +0.33, 15.67 - 17 = -1.33; mean +1/3; 2 of 3 seeds
    assert cite["per_seed"] == pytest.approx([2.0, 1 / 3, -4 / 3]) and cite["holds"]
    assert "zero-shot +1.00, few-shot +2.33, common -2.33" in cite["text"]
    frozen = v["CITE with CCA initialization beats the frozen CCA"]
    assert frozen["per_seed"] == pytest.approx([16 - 19, 46 / 3 - 19, 47 / 3 - 19]) and not frozen["holds"]
    deep = v["Deep CCA stays below linear CCA"]  # cca minus deep_cca: +1, -1, 0: mean 0 is no win
    assert deep["per_seed"] == pytest.approx([1.0, -1.0, 0.0]) and not deep["holds"]
    npa = v["NPA barely changes QA R-CNN"]
    assert npa["mean"] == pytest.approx(1 / 3) and npa["holds"] and "within +/-1" in npa["text"]
    assert "Embedding Network" not in " ".join(v)  # its runs are absent: no verdict


def test_a_claim_with_a_run_still_gaining_is_undecided_and_says_which_and_what_the_rule_gives():
    v = _by_claim(claim_verdicts(RUNS, {"cite": ["seed 2"], "qa_rcnn_npa": ["seed 0", "seed 1"]}))
    cite = v["CCA initialization beats random initialization, CITE"]
    assert cite["holds"] is None and cite["per_seed"] == pytest.approx([2.0, 1 / 3, -4 / 3])
    assert cite["text"].startswith("003: CCA initialization beats random initialization, CITE: UNDECIDED (the rule alone: "
                                   "holds; still gaining when the budget ended: cite seed 2) here: mean +0.3 mAP, 2/3 seeds")
    npa = v["NPA barely changes QA R-CNN"]
    assert npa["holds"] is None and "UNDECIDED (the rule alone: holds; still gaining when the budget ended: " \
        "qa_rcnn_npa seed 0, qa_rcnn_npa seed 1) here: mean +0.3 mAP (within +/-1)" in npa["text"]
    assert v["CITE with CCA initialization beats the frozen CCA"]["holds"] is False  # cite_cca and cca: settled
    assert v["Deep CCA stays below linear CCA"]["holds"] is False
    # PPA and filtering rows are cite_cca's own runs evaluated otherwise: its unsettled runs make them undecided
    runs = {"cite_cca": [_m(9.0, 15.0, 24.0)] * 2, "cite_cca_ppa": [_m(9.0, 16.0, 26.0)] * 2}
    assert _by_claim(claim_verdicts(runs, {"cite": ["seed 0"]}))["PPA-augmented positives raise CITE's mAP"]["holds"] is True
    ppa = _by_claim(claim_verdicts(runs, {"cite_cca": ["seed 1"]}))["PPA-augmented positives raise CITE's mAP"]
    assert ppa["holds"] is None and "still gaining when the budget ended: cite_cca seed 1)" in ppa["text"]


def test_ppa_and_filtering_rows_and_the_negligible_boundary():
    runs = {"cite_cca": [_m(9.0, 15.0, 24.0)] * 2, "cite_cca_ppa": [_m(9.0, 16.0, 26.0)] * 2,
            "cite_cca_filtered": [_m(9.0, 15.0, 21.0)] * 2}
    v = _by_claim(claim_verdicts(runs))
    assert v["PPA-augmented positives raise CITE's mAP"]["per_seed"] == pytest.approx([1.0, 1.0])
    assert not v["phrase filtering raises CITE's mAP"]["holds"]
    assert negligible("t", "p", [NEGLIGIBLE, NEGLIGIBLE], "mAP", NEGLIGIBLE)["holds"]  # exactly at the tolerance
    beyond = negligible("t", "p", [1.5, 0.9], "mAP", NEGLIGIBLE)
    assert not beyond["holds"] and beyond["text"] == "t: DOES NOT HOLD here: mean +1.2 mAP (beyond +/-1), seeds +1.5, +0.9; paper p."
    assert negligible("t", "p", [-1.2, -1.0], "mAP", 1.0)["text"].startswith("t: DOES NOT HOLD here: mean -1.1 mAP (beyond +/-1)")


def test_single_runs_stand_for_every_seed_and_the_table_gives_mean_sd_and_the_paper():
    assert per_seed({"cca": [1], "cite": [1, 2, 3]}, 3) == {"cca": [1, 1, 1], "cite": [1, 2, 3]}
    lines = format_table({"cite_cca": RUNS["cite_cca"], "x": [_m(1.0, 2.0, 3.0)]}, {"cite_cca": 2.25}).splitlines()
    assert lines[0] == "| model | runs | zero-shot | few-shot | common | mAP | loc. acc. | paper mAP | minutes per run |"
    assert lines[2] == "| cite_cca | 3 | 8.0 ± 1.0 | 14.0 ± 1.0 | 25.0 ± 1.0 | 15.7 ± 0.3 | 70.0 ± 0.0 | 12.7 | 2.2 |"
    assert lines[3] == "| x | 1 | 1.0 | 2.0 | 3.0 | 2.0 | 70.0 | - | - |"


def test_under_the_presence_oracle_each_claim_s_difference_is_split_in_two():
    # under the oracle cite_cca gains +3 on every bucket of every seed; cite and cca are unchanged
    oracle = {**RUNS, "cite_cca": [_m(z + 3, f + 3, c + 3) for z, f, c in ((9, 15, 24), (7, 13, 26), (8, 14, 25))]}
    lines = format_under_oracle(claim_verdicts(RUNS), claim_verdicts(oracle)).splitlines()
    by = {line.split(": ", 2)[1]: line.split(": ", 2)[2] for line in lines}
    # as tested: +2, +1/3, -4/3 (mean +0.3); under the oracle +5, +10/3, +5/3 (mean +3.3); the rest -3.0
    assert by["CCA initialization beats random initialization, CITE"] == \
        "+0.3 mAP as tested; +3.3 (+5.0, +3.3, +1.7) under the presence oracle; -3.0 from the detections of absent phrases"
    assert by["Deep CCA stays below linear CCA"].endswith("+0.0 from the detections of absent phrases")
    assert len(lines) == len(claim_verdicts(RUNS))
    assert format_under_oracle(claim_verdicts(RUNS), []) == ""  # no oracle metrics: nothing to split


# Every model of the comparison, two seeds, differences chosen to read by hand: each claim's per-seed,
# per-bucket and mean differences are in its line below.
ALL = {"cite_cca": [_m(9.0, 12.0, 15.0)] * 2, "cite": [_m(6.0, 9.0, 12.0)] * 2,                  # +3 everywhere
       "embedding_net_cca": [_m(8.0, 10.0, 12.0)] * 2, "embedding_net": [_m(5.0, 7.0, 9.0)] * 2,  # +3 everywhere
       "cca": [_m(10.0, 12.0, 14.0)],                             # cite_cca - cca: -1, 0, +1, overall 0
       "deep_cca": [_m(9.0, 11.0, 13.0), _m(11.0, 13.0, 15.0)],   # cca - deep_cca: +1 then -1 in each
       "qa_rcnn_staged": [_m(3.0, 4.0, 8.0)] * 2, "qa_rcnn_npa": [_m(3.0, 4.0, 9.5)] * 2,   # common +1.5: +0.5
       "cite_cca_ppa": [_m(10.0, 13.0, 16.0)] * 2,                # +1 everywhere
       "cite_cca_filtered": [_m(9.0, 12.0, 12.0)] * 2}            # common -3: -1

ALL_LINES = [
    "003: CCA initialization beats random initialization, CITE: HOLDS here: mean +3.0 mAP, 2/2 seeds (+3.0, +3.0); per "
    "bucket: zero-shot +3.00, few-shot +3.00, common +3.00; paper +6.7 (12.7 vs 6.0; zero-shot +5.0, few-shot +6.8, common +8.3).",
    "003: CCA initialization beats random initialization, Embedding Network: HOLDS here: mean +3.0 mAP, 2/2 seeds (+3.0, "
    "+3.0); per bucket: zero-shot +3.00, few-shot +3.00, common +3.00; paper +6.9 (12.3 vs 5.4).",
    "003: CITE with CCA initialization beats the frozen CCA: DOES NOT HOLD here: mean +0.0 mAP, 0/2 seeds (+0.0, +0.0); per "
    "bucket: zero-shot -1.00, few-shot +0.00, common +1.00; paper +0.5 (12.7 vs 12.2).",
    "003: Deep CCA stays below linear CCA: DOES NOT HOLD here: mean +0.0 mAP, 1/2 seeds (+1.0, -1.0); per bucket: zero-shot "
    "+0.00, few-shot +0.00, common +0.00; paper +2.6 (12.2 vs 9.6).",
    "003: NPA barely changes QA R-CNN: HOLDS here: mean +0.5 mAP (within +/-1), seeds +0.5, +0.5; per bucket: zero-shot "
    "+0.00, few-shot +0.00, common +1.50; paper +0.2 (5.9 vs 5.7).",
    "003: PPA-augmented positives raise CITE's mAP: HOLDS here: mean +1.0 mAP, 2/2 seeds (+1.0, +1.0); per bucket: "
    "zero-shot +1.00, few-shot +1.00, common +1.00; paper +1.0 (Table V(a) 13.7 vs Table IV 12.7).",
    "003: phrase filtering raises CITE's mAP: DOES NOT HOLD here: mean -1.0 mAP, 0/2 seeds (-1.0, -1.0); per bucket: "
    "zero-shot +0.00, few-shot +0.00, common -3.00; paper +1.3 (Table VI: 13.7 -> 15.0).",
]


def test_every_claim_line_word_for_word_with_every_model_present():
    verdicts = claim_verdicts(ALL)
    assert [v["text"] for v in verdicts] == ALL_LINES
    assert format_claims(verdicts) == "\n".join(ALL_LINES)
    assert claim_verdicts({}) == [] and format_claims([]) == ""


@pytest.mark.parametrize("line", range(len(ALL_LINES)))
def test_each_claim_needs_only_its_own_two_models(line):
    """Each claim from exactly the two models it compares (no other), and from neither alone."""
    pairs = [("cite_cca", "cite"), ("embedding_net_cca", "embedding_net"), ("cite_cca", "cca"), ("cca", "deep_cca"),
             ("qa_rcnn_npa", "qa_rcnn_staged"), ("cite_cca_ppa", "cite_cca"), ("cite_cca_filtered", "cite_cca")]
    a, b = pairs[line]
    assert [v["text"] for v in claim_verdicts({a: ALL[a], b: ALL[b]})] == [ALL_LINES[line]]
    assert claim_verdicts({a: ALL[a]}) == [] and claim_verdicts({b: ALL[b]}) == []


def test_a_still_gaining_run_of_either_model_of_a_claim_makes_it_undecided():
    """The first model of "A beats B" (the Embedding Network's CCA-initialized one) and the second of
    "NPA barely changes QA R-CNN" (the staged QA R-CNN) still gaining: both claims UNDECIDED, naming them."""
    v = _by_claim(claim_verdicts(ALL, {"embedding_net_cca": ["seed 0"], "qa_rcnn_staged": ["seed 1"]}))
    embedding = v["CCA initialization beats random initialization, Embedding Network"]
    assert embedding["holds"] is None and embedding["text"].startswith(
        "003: CCA initialization beats random initialization, Embedding Network: UNDECIDED (the rule alone: holds; still "
        "gaining when the budget ended: embedding_net_cca seed 0) here: mean +3.0 mAP")
    npa = v["NPA barely changes QA R-CNN"]
    assert npa["holds"] is None and "(the rule alone: holds; still gaining when the budget ended: qa_rcnn_staged seed 1)" \
        in npa["text"]
    assert sum(x["holds"] is None for x in v.values()) == 2  # no other claim compares them


def test_the_table_s_second_line_is_its_separator():
    lines = format_table({"cite": ALL["cite"]}).splitlines()
    assert lines[1] == "|---|---|---|---|---|---|---|---|---|" and len(lines) == 3
