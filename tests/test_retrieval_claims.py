"""Verdicts on papers 002 and 000's retrieval claims from hand-made metrics."""
import math

import pytest

from phrasedet.engine.comparison.retrieval_claims import (PAPER_001_CLAIMS, RECALLS, claim_verdicts, difference, format_claims,
                                              format_seed_table, mean_sd)


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


# ----------------------------------------------------------------------------- exact wording
def _r(rsum, i2t=0.0, t2i=0.0):
    return {**{k: 0.0 for k in RECALLS}, "i2t_R@1": i2t, "t2i_R@1": t2i, "rsum": rsum}


# two seeds of every model the claims read
ALL_RUNS = {"vse0": [_r(300), _r(300)], "vsepp": [_r(310), _r(296)], "vse0_ft": [_r(320), _r(320)],
            "vsepp_ft": [_r(340), _r(318)],
            "two_branch": [_r(200, 30), _r(210, 32)], "similarity_net": [_r(120, 5), _r(100, 4)],
            "two_branch_no_nbr": [_r(205), _r(205)],
            "instance_loss": [_r(90, 4, 3), _r(80, 5, 4)], "ranking_only": [_r(25, 1, 1), _r(30, 1, 1)],
            "one_stage": [_r(100, 6, 2), _r(70, 3, 3)], "no_shift": [_r(91, 4, 3), _r(79, 5, 4)],
            "instance_loss_stage1": [_r(27, 2, 1), _r(27, 2, 1)], "ranking_only_stage1": [_r(25, 1, 1), _r(25, 1, 1)],
            "no_shift_stage1": [_r(28, 1, 1), _r(26, 1, 2)]}
REFERENCE_RUNS = {"vsepp_warmup": [_r(330), _r(290)], "clip": [_r(299), _r(299)]}

# One line per claim, in this order. Differences by hand: vsepp - vse0 [+10, -4]; fine-tuned [+20, -2];
# gap [+10, +2]; two_branch - similarity_net [+80, +110], i2t R@1 [+25, +28]; neighbourhood [-5, +5];
# stage I [+2, +2], R@1 [+1, +1] / [0, 0]; stage II [+65, +50], R@1 [+3, +4] / [+2, +3]; one stage
# [-10, +10], R@1 [-2, +2] / [+1, +1]; shift stage I [-1, +1], R@1 [+1, +1] / [0, -1]; shift [-1, +1].
ALL_CLAIMS = """\
002: max of hinges (VSE++) beats the sum of hinges (VSE0), frozen CNN: HOLDS here: mean +3.0 rsum, 1/2 seeds \
(+10.0, -4.0); paper +38.8 (Flickr30K, ResNet).
002: max of hinges beats the sum of hinges, fine-tuned CNN: HOLDS here: mean +9.0 rsum, 1/2 seeds (+20.0, -2.0); \
paper +42.0 (Flickr30K, ResNet FT).
002: the gain of max over sum is larger with a fine-tuned CNN: HOLDS here: mean +6.0 rsum, 2/2 seeds (+10.0, +2.0) \
(gain fine-tuned +9.0, frozen +3.0); paper +3.2 (Flickr30K), +5.4 (COCO 1K).
000: the embedding network beats the similarity network: HOLDS here: mean +95.0 rsum, 2/2 seeds (+80.0, +110.0); \
image->text R@1 +26.5; paper +189.4 (360.0 vs 170.6; I->S R@1 43.2 vs 16.6).
000: the sentence-neighbourhood term improves retrieval: DOES NOT HOLD here: mean +0.0 rsum, 1/2 seeds (-5.0, +5.0); \
paper +4.2 (355.8 -> 360.0).
001: the instance loss beats the ranking loss with a frozen CNN (stage I): HOLDS here: mean +2.0 rsum, 2/2 seeds \
(+2.0, +2.0); R@1 image query +1.0, text query +0.0; paper image-query R@1 +33.8 (39.9 vs 6.1), text-query +23.3 \
(Table 2).
001: instance + ranking loss (stage II) beats the ranking loss alone: HOLDS here: mean +57.5 rsum, 2/2 seeds \
(+65.0, +50.0); R@1 image query +3.5, text query +2.5; paper image-query R@1 +7.9 (55.4 vs 47.5), text-query +10.7 \
(Table 2).
001: stage I helps (two stages beat one stage with the same iterations): DOES NOT HOLD here: mean +0.0 rsum, 1/2 \
seeds (-10.0, +10.0); R@1 image query +0.0, text query +1.0; paper no number (Sec. 5: stage I gives the ranking loss \
a good initialization).
001: position shift helps (stage I): DOES NOT HOLD here: mean +0.0 rsum, 1/2 seeds (-1.0, +1.0); R@1 image query \
+1.0, text query -0.5; paper image-query R@1 +5.8 (39.9 vs 34.1), text-query +4.6 (Table 6, stage I).
001: position shift helps (after stage II): DOES NOT HOLD here: mean +0.0 rsum, 1/2 seeds (-1.0, +1.0); R@1 image \
query +0.0, text query +0.0; paper not measured (Table 6 is stage I)."""


def test_every_claim_line_word_for_word():
    """The lines compare_retrieval.py prints: claim, verdict, per-seed differences, extras, paper figure."""
    assert format_claims(claim_verdicts(ALL_RUNS)) == ALL_CLAIMS


def test_a_larger_gain_without_a_gain_reads_so_and_does_not_hold():
    runs = _runs(vse0=[100, 100], vsepp=[50, 50], vse0_ft=[100, 100], vsepp_ft=[60, 70])
    gain = _by_claim(claim_verdicts(runs))["002: the gain of max over sum is larger with a fine-tuned CNN"]
    assert gain["holds"] is False and gain["mean"] == 15.0
    assert gain["text"] == ("002: the gain of max over sum is larger with a fine-tuned CNN: DOES NOT HOLD here: there is "
                            "no gain to compare, max of hinges loses to the sum with the fine-tuned CNN (gain fine-tuned "
                            "-35.0, frozen -50.0); paper +3.2 (Flickr30K), +5.4 (COCO 1K).")


def test_difference_defaults_to_rsum():
    assert difference(ALL_RUNS, "vsepp", "vse0") == [10.0, -4.0]
    assert difference(ALL_RUNS, "two_branch", "similarity_net", "i2t_R@1") == [25.0, 28.0]


def test_seed_table_header_and_the_papers_figures_of_every_model():
    """The paper columns: rsum and image-to-text R@1 of the rows quoted in the module's docstring
    (002 Table 3, 000 Table 2, 001 Tables 2 and 6, which give no rsum); "-" where a paper gives none."""
    names = ["vse0", "vsepp", "vse0_ft", "vsepp_ft", "two_branch", "two_branch_no_nbr", "similarity_net", "instance_loss",
             "ranking_only", "instance_loss_stage1", "ranking_only_stage1", "no_shift_stage1", "one_stage"]
    lines = format_seed_table({n: [_r(100.0)] for n in names}, {"vse0": 1.5, "one_stage": 3}).splitlines()
    assert lines[:2] == ["| model | i2t R@1 | i2t R@5 | i2t R@10 | t2i R@1 | t2i R@5 | t2i R@10 | rsum | paper rsum | "
                         "paper i2t R@1 | minutes per run |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    assert [line.split(" | 100.0 | ")[1] for line in lines[2:]] == [
        "324.2 | 36.6 | 1.5 |", "363.0 | 43.7 | - |", "367.8 | 42.1 | - |", "409.8 | 52.9 | - |", "360.0 | 43.2 | - |",
        "355.8 | 41.6 | - |", "170.6 | 16.6 | - |", "- | 55.4 | - |", "- | 47.5 | - |", "- | 39.9 | - |", "- | 6.1 | - |",
        "- | 34.1 | - |", "- | - | 3.0 |"]


def test_seed_table_row_of_two_seeds():
    runs = {"one_stage": [{"i2t_R@1": 1.0, "i2t_R@5": 2.0, "i2t_R@10": 3.0, "t2i_R@1": 4.0, "t2i_R@5": 5.0,
                           "t2i_R@10": 6.0, "rsum": 21.0},
                          {"i2t_R@1": 3.0, "i2t_R@5": 2.0, "i2t_R@10": 7.0, "t2i_R@1": 4.0, "t2i_R@5": 9.0,
                           "t2i_R@10": 6.0, "rsum": 31.0}]}
    assert format_seed_table(runs, {}).splitlines()[2] == \
        "| one_stage | 2.0 ± 1.4 | 2.0 ± 0.0 | 5.0 ± 2.8 | 4.0 ± 0.0 | 7.0 ± 2.8 | 6.0 ± 0.0 | 26.0 ± 7.1 | - | - | - |"


@pytest.mark.parametrize("models, claims", [
    (("vse0", "vsepp"), ["002: max of hinges (VSE++) beats the sum of hinges (VSE0), frozen CNN"]),
    (("vse0_ft", "vsepp_ft"), []),   # the fine-tuned pair alone: its gain has no frozen gain to compare with
    (("two_branch", "similarity_net"), ["000: the embedding network beats the similarity network"]),
    (("two_branch", "two_branch_no_nbr"), ["000: the sentence-neighbourhood term improves retrieval"]),
    (("vse0", "vsepp_warmup"), ["reference, 002 with VSE-infinity's warm-up: max of hinges after one epoch of the sum "
                                "beats the sum of hinges, frozen CNN"]),
    (("vse0", "clip"), ["reference: CLIP's InfoNCE beats the sum of hinges (VSE0), frozen CNN"]),
    (("vsepp_warmup", "clip"), []),
] + [((model, baseline), [title]) for title, model, baseline, _ in PAPER_001_CLAIMS])
def test_each_claim_needs_exactly_its_two_models(models, claims):
    runs = {**ALL_RUNS, **REFERENCE_RUNS}
    assert [v["claim"] for v in claim_verdicts({m: runs[m] for m in models})] == claims


def test_reference_rows_word_for_word():
    """vsepp_warmup - vse0 = +30, -10 (mean +10, 1 of 2 seeds: half agree, so it holds); clip - vse0 = -1, -1."""
    verdicts = claim_verdicts({"vse0": ALL_RUNS["vse0"], **REFERENCE_RUNS})
    assert format_claims(verdicts) == (
        "reference, 002 with VSE-infinity's warm-up: max of hinges after one epoch of the sum beats the sum of hinges, "
        "frozen CNN: HOLDS here: mean +10.0 rsum, 1/2 seeds (+30.0, -10.0); paper +38.8 (002's claim, without the "
        "warm-up).\n"
        "reference: CLIP's InfoNCE beats the sum of hinges (VSE0), frozen CNN: DOES NOT HOLD here: mean -1.0 rsum, 0/2 "
        "seeds (-1.0, -1.0); paper no number (in no paper here).")
