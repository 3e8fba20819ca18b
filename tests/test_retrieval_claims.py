"""Verdicts on papers 002 and 000's retrieval claims from hand-made metrics."""
import math

import pytest

from phrasedet.engine.retrieval_claims import PAPER_001_CLAIMS, RECALLS, claim_verdicts, difference, format_seed_table, mean_sd


def _m(rsum, r1=10.0):
    return {**{k: rsum / 6 for k in RECALLS}, "i2t_R@1": r1, "rsum": rsum}


def _runs(**rsums):
    return {name: [_m(v) for v in values] for name, values in rsums.items()}


def _by_claim(verdicts):
    return {v["claim"]: v for v in verdicts}


def test_max_of_hinges_holds_when_it_wins_on_average_and_in_most_seeds():
    runs = _runs(vse0=[100, 100, 100], vsepp=[110, 90, 120])
    (v,) = claim_verdicts(runs)
    assert v["holds"] and v["per_seed"] == [10, -10, 20] and v["mean"] == pytest.approx(20 / 3)
    assert "HOLDS here: mean +6.7 rsum, 2/3 seeds (+10.0, -10.0, +20.0)" in v["text"]


def test_a_mean_win_from_one_seed_only_does_not_hold():
    (v,) = claim_verdicts(_runs(vse0=[100, 100, 100], vsepp=[160, 95, 95]))
    assert not v["holds"] and "DOES NOT HOLD" in v["text"]


def test_a_tie_is_not_a_win():
    (v,) = claim_verdicts(_runs(vse0=[100, 100], vsepp=[100, 100]))
    assert not v["holds"]


def test_fine_tuned_gain_compares_the_two_gains_seed_by_seed():
    runs = _runs(vse0=[100, 100], vsepp=[110, 104], vse0_ft=[120, 120], vsepp_ft=[140, 121])
    claims = _by_claim(claim_verdicts(runs))
    gain = claims["002: the gain of max over sum is larger with a fine-tuned CNN"]
    assert gain["per_seed"] == [10, -3] and gain["holds"]  # mean +3.5 and 1 of 2 seeds: at least half agree
    assert claims["002: max of hinges beats the sum of hinges, fine-tuned CNN"]["per_seed"] == [20, 1]


def test_paper_000_claims_use_rsum_and_report_image_to_text_r1():
    runs = {"two_branch": [_m(200, 30), _m(210, 32)], "similarity_net": [_m(120, 5), _m(100, 4)],
            "two_branch_no_nbr": [_m(205), _m(205)]}
    claims = _by_claim(claim_verdicts(runs))
    emb = claims["000: the embedding network beats the similarity network"]
    assert emb["holds"] and emb["per_seed"] == [80, 110] and "image->text R@1 +26.5" in emb["text"]
    nbr = claims["000: the sentence-neighbourhood term improves retrieval"]
    assert nbr["per_seed"] == [-5, 5] and nbr["mean"] == 0 and not nbr["holds"]


def test_difference_needs_the_same_seeds():
    with pytest.raises(ValueError, match="compare the same seeds"):
        difference(_runs(a=[1, 2], b=[1]), "a", "b")


def test_seed_table_gives_mean_and_sample_sd():
    assert mean_sd([1.0, 3.0]) == (2.0, pytest.approx(math.sqrt(2)))
    assert math.isnan(mean_sd([5.0])[1])
    table = format_seed_table(_runs(vsepp=[120, 180]), {"vsepp": 2.5})
    row = table.splitlines()[2]
    assert row.startswith("| vsepp | 10.0 ± 0.0 | 25.0 ± 7.1 |") and "| 150.0 ± 42.4 | 363.0 | 43.7 | 2.5 |" in row
    # paper 001 gives R@1 but no rsum; a stage-I evaluation has no run time of its own
    row = format_seed_table(_runs(instance_loss_stage1=[90]), {}).splitlines()[2]
    assert row.endswith("| 90.0 | - | 39.9 | - |")


def test_in_batch_matches_by_hand():
    from phrasedet.engine.retrieval_claims import in_batch_matches

    def rec(*captions):  # captions given as the lists of phrases they name
        anns = [{"phrase": p, "caption_index": k} for k, c in enumerate(captions) for p in c]
        return {"captions": [""] * len(captions), "annotations": anns}

    records = [rec(["red circle"], ["blue square", "red circle"]), rec(["red circle", "green star"]), rec(["blue square"]), rec([])]
    out = in_batch_matches(records, batch_size=3)
    # q: caption (0,0) "red circle" matches image 1 of 3 others -> 1/3; (0,1) needs both -> 0/3;
    # (1,0) needs red circle + green star -> 0; (2,0) blue square -> image 0 -> 1/3; image 3 names nothing
    assert out["captions"] == 4
    assert out["expected"] == pytest.approx(2 * (1 / 3 + 0 + 0 + 1 / 3) / 4)
    assert out["at_least_one"] == pytest.approx(2 * (1 - (2 / 3) ** 2) / 4)


def test_a_larger_gain_needs_a_gain():
    runs = _runs(vse0=[100, 100], vsepp=[50, 50], vse0_ft=[100, 100], vsepp_ft=[60, 70])
    gain = _by_claim(claim_verdicts(runs))["002: the gain of max over sum is larger with a fine-tuned CNN"]
    assert gain["per_seed"] == [10, 20] and not gain["holds"]
    assert "there is no gain to compare" in gain["text"] and "gain fine-tuned -35.0, frozen -50.0" in gain["text"]


def _m2(rsum, i2t, t2i):
    return {**_m(rsum, i2t), "t2i_R@1": t2i}


def test_paper_001_claims_compare_rsum_and_report_both_r1():
    runs = {"instance_loss": [_m2(90, 4, 3), _m2(80, 5, 4), _m2(85, 4, 3)],
            "ranking_only": [_m2(25, 1, 1), _m2(30, 1, 1), _m2(20, 1, 1)],
            "one_stage": [_m2(130, 8, 5), _m2(70, 3, 2), _m2(120, 6, 4)],
            "instance_loss_stage1": [_m2(27, 1, 1)] * 3, "ranking_only_stage1": [_m2(25, 1, 1)] * 3,
            "no_shift_stage1": [_m2(27, 1, 1)] * 3}
    claims = _by_claim(claim_verdicts(runs))
    assert list(claims) == [c[0] for c in PAPER_001_CLAIMS[:4]]  # no_shift (after stage II) was not run
    both = claims["001: instance + ranking loss (stage II) beats the ranking loss alone"]
    assert both["holds"] and both["per_seed"] == [65, 50, 65]
    assert "R@1 image query +3.3, text query +2.3" in both["text"] and "paper image-query R@1 +7.9" in both["text"]
    stage1 = claims["001: stage I helps (two stages beat one stage with the same iterations)"]
    assert stage1["per_seed"] == [-40, 10, -35] and not stage1["holds"]
    shift = claims["001: position shift helps (stage I)"]
    assert shift["per_seed"] == [0, 0, 0] and not shift["holds"]  # a tie is not a win
