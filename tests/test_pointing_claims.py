"""Paper 004's verdicts from hand-made runs, and reading train_net's results of two test splits."""
import pytest

from phrasedet.engine.comparison.pointing_claims import PAPER, claim_verdicts, format_claims, format_table, r1_sum, split_results


def _run(acc, r1_i2t, r1_t2i, centre=12.0):
    recalls = {"i2t_R@1": r1_i2t, "i2t_R@5": 0.0, "i2t_R@10": 0.0, "t2i_R@1": r1_t2i, "t2i_R@5": 0.0, "t2i_R@10": 0.0}
    return {"pointing": {"accuracy": acc, "centre_accuracy": centre}, "retrieval": recalls}


RUNS = {"dsve_loc": [_run(20, 10, 5), _run(10, 10, 5), _run(30, 12, 6)],
        "dsve_loc_gap": [_run(18, 8, 5), _run(15, 9, 5), _run(25, 13, 6)],
        "dsve_loc_sum": [_run(25, 20, 10), _run(20, 3, 2), _run(22, 15, 9)]}


def test_verdicts_follow_the_seed_by_seed_differences():
    verdicts = {v["claim"].split(": ", 1)[1]: v for v in claim_verdicts(RUNS)}
    centre = verdicts["DSVE-loc beats the centre baseline on the pointing game"]
    assert centre["per_seed"] == [8, -2, 18] and centre["holds"]  # mean +8, 2 of 3
    pooling = verdicts["WELDON pooling beats average pooling on the pointing game"]
    assert pooling["per_seed"] == [2, -5, 5] and pooling["mean"] == pytest.approx(2 / 3) and pooling["holds"]
    r1 = verdicts["WELDON pooling beats average pooling on retrieval"]
    assert r1["per_seed"] == [2, 1, -1] and r1["holds"]
    hard = verdicts["hard negatives beat the sum over negatives on retrieval"]
    assert hard["per_seed"] == [-15, 10, -6] and not hard["holds"]
    assert "DOES NOT HOLD here: mean -3.7 R@1 (both directions summed), 1/3 seeds (-15.0, +10.0, -6.0)" in hard["text"]


def test_missing_models_give_only_the_claims_they_can():
    assert [v["claim"] for v in claim_verdicts({"dsve_loc": RUNS["dsve_loc"]})] == [
        "004: DSVE-loc beats the centre baseline on the pointing game"]


def test_split_results_reads_one_or_two_test_splits():
    both = {"captions_test": {"retrieval": {"rsum": 1.0}}, "pointing_test": {"pointing": {"accuracy": 2.0}}}
    assert split_results(both) == {"retrieval": {"rsum": 1.0}, "pointing": {"accuracy": 2.0}}
    with pytest.raises(KeyError, match=r"no \['pointing'\] metrics \(test splits: \['captions_test'\]\)"):
        split_results({"captions_test": {"retrieval": {"rsum": 1.0}}})


def test_table_gives_mean_and_spread():
    table = format_table({"dsve_loc": RUNS["dsve_loc"]}, {"dsve_loc": 4.5})
    assert "| dsve_loc | 20.0 ± 10.0 | 12.0 ± 0.0 | 10.7 ± 1.2 |" in table and table.endswith("| 4.5 |")
    assert r1_sum(RUNS["dsve_loc"][0]) == 15


# ----------------------------------------------------------------------------- exact wording
def test_every_claim_line_word_for_word():
    """The lines compare_pointing.py prints. Differences by hand from RUNS: accuracy - centre [+8, -2, +18];
    accuracy vs gap [+2, -5, +5]; R@1 sums 15, 15, 18 vs gap 13, 14, 19 and vs sum 30, 5, 24."""
    assert format_claims(claim_verdicts(RUNS)) == (
        "004: DSVE-loc beats the centre baseline on the pointing game: HOLDS here: mean +8.0 points of accuracy, "
        "2/3 seeds (+8.0, -2.0, +18.0); paper +14.3 (33.8 vs 19.5 %).\n"
        "004: WELDON pooling beats average pooling on the pointing game: HOLDS here: mean +0.7 points of accuracy, "
        "2/3 seeds (+2.0, -5.0, +5.0); paper +1.1.\n"
        "004: WELDON pooling beats average pooling on retrieval: HOLDS here: mean +0.7 R@1 (both directions summed), "
        "2/3 seeds (+2.0, +1.0, -1.0); paper +10.0 (caption R@1 +5.3, image R@1 +4.7).\n"
        "004: hard negatives beat the sum over negatives on retrieval: DOES NOT HOLD here: mean -3.7 R@1 (both "
        "directions summed), 1/3 seeds (-15.0, +10.0, -6.0); paper +36.6 (caption R@1 +20.3, image R@1 +16.3).")


def test_the_warm_up_reference_rows_word_for_word():
    """dsve_loc_warmup: accuracy - centre = +13, -2, +3; its R@1 sums 27, 5, 24 against the sum's 30, 5, 24.
    dsve_loc_warmup_plateau: accuracy - centre = +28, +18, +8; R@1 sums 31, 6, 25: +1, +1, +1."""
    runs = {"dsve_loc_sum": RUNS["dsve_loc_sum"],
            "dsve_loc_warmup": [_run(25, 20, 7), _run(10, 3, 2), _run(15, 15, 9)],
            "dsve_loc_warmup_plateau": [_run(40, 21, 10), _run(30, 4, 2), _run(20, 16, 9)]}
    assert format_claims(claim_verdicts(runs)) == (
        "reference, 004 with VSE-infinity's one-epoch warm-up: DSVE-loc beats the centre baseline: HOLDS here: mean "
        "+4.7 points of accuracy, 2/3 seeds (+13.0, -2.0, +3.0); paper +14.3 (004's claim, without the warm-up).\n"
        "reference, 004 with VSE-infinity's one-epoch warm-up: hard negatives beat the sum over negatives on "
        "retrieval: DOES NOT HOLD here: mean -1.0 R@1 (both directions summed), 0/3 seeds (-3.0, +0.0, +0.0); paper "
        "+36.6 (004's claim, without the warm-up).\n"
        "reference, 004 with a warm-up until the sum has left its plateau: DSVE-loc beats the centre baseline: HOLDS "
        "here: mean +18.0 points of accuracy, 3/3 seeds (+28.0, +18.0, +8.0); paper +14.3 (004's claim, without the "
        "warm-up).\n"
        "reference, 004 with a warm-up until the sum has left its plateau: hard negatives beat the sum over negatives "
        "on retrieval: HOLDS here: mean +1.0 R@1 (both directions summed), 3/3 seeds (+1.0, +1.0, +1.0); paper +36.6 "
        "(004's claim, without the warm-up).")
    assert [v["claim"] for v in claim_verdicts({"dsve_loc_warmup": runs["dsve_loc_warmup"]})] == [
        "reference, 004 with VSE-infinity's one-epoch warm-up: DSVE-loc beats the centre baseline"]


def test_a_claim_with_a_run_still_gaining_is_undecided_and_the_others_are_not():
    runs = {**RUNS, "dsve_loc_warmup_plateau": RUNS["dsve_loc"]}
    verdicts = {v["claim"]: v for v in claim_verdicts(runs, {"dsve_loc_gap": ["seed 2"], "dsve_loc_sum": ["seed 0", "seed 1"]})}
    pooling = verdicts["004: WELDON pooling beats average pooling on the pointing game"]
    assert pooling["holds"] is None and pooling["text"].startswith(
        "004: WELDON pooling beats average pooling on the pointing game: UNDECIDED (the rule alone: holds; still "
        "gaining when the budget ended: dsve_loc_gap seed 2) here: mean +0.7")
    hard = verdicts["004: hard negatives beat the sum over negatives on retrieval"]
    assert hard["holds"] is None and "(the rule alone: does not hold; still gaining when the budget ended: " \
        "dsve_loc_sum seed 0, dsve_loc_sum seed 1)" in hard["text"]
    assert verdicts["004: DSVE-loc beats the centre baseline on the pointing game"]["holds"] is True
    reference = "reference, 004 with a warm-up until the sum has left its plateau: "
    assert verdicts[reference + "DSVE-loc beats the centre baseline"]["holds"] is True
    assert verdicts[reference + "hard negatives beat the sum over negatives on retrieval"]["holds"] is None


def test_a_still_gaining_run_of_the_first_model_of_a_claim_makes_it_undecided_too():
    """A run of DSVE-loc still gaining: the centre claim and both comparisons it leads are
    UNDECIDED, naming it; a still-gaining reference run does the same to its own two claims only."""
    runs = {**RUNS, "dsve_loc_warmup_plateau": RUNS["dsve_loc"]}
    verdicts = {v["claim"]: v for v in claim_verdicts(runs, {"dsve_loc": ["seed 1"], "dsve_loc_warmup_plateau": ["seed 0"]})}
    for claim in ("004: DSVE-loc beats the centre baseline on the pointing game",
                  "004: WELDON pooling beats average pooling on the pointing game",
                  "004: WELDON pooling beats average pooling on retrieval",
                  "004: hard negatives beat the sum over negatives on retrieval"):
        assert verdicts[claim]["holds"] is None
        assert "; still gaining when the budget ended: dsve_loc seed 1) here" in verdicts[claim]["text"]
    reference = "reference, 004 with a warm-up until the sum has left its plateau: "
    for claim in ("DSVE-loc beats the centre baseline", "hard negatives beat the sum over negatives on retrieval"):
        assert verdicts[reference + claim]["holds"] is None
        assert "; still gaining when the budget ended: dsve_loc_warmup_plateau seed 0) here" in verdicts[reference + claim]["text"]


@pytest.mark.parametrize("models, claims", [
    ({"dsve_loc_gap", "dsve_loc_sum"}, []),   # no DSVE-loc: nothing to compare
    ({"dsve_loc", "dsve_loc_gap"}, ["DSVE-loc beats the centre baseline on the pointing game",
                                    "WELDON pooling beats average pooling on the pointing game",
                                    "WELDON pooling beats average pooling on retrieval"]),
    ({"dsve_loc", "dsve_loc_sum"}, ["DSVE-loc beats the centre baseline on the pointing game",
                                    "hard negatives beat the sum over negatives on retrieval"]),
])
def test_each_claim_needs_its_two_models(models, claims):
    runs = {m: rs for m, rs in RUNS.items() if m in models}
    assert [v["claim"] for v in claim_verdicts(runs)] == [f"004: {c}" for c in claims]


def test_paper_figures_are_the_readme_row():
    # README.md's pointing table: "paper 004 (COCO, Visual Genome) | 33.8 | 19.5 | 69.8 | 96.6 | 55.9 | ..."
    assert PAPER == {"dsve_loc": {"pointing": 33.8, "centre": 19.5, "i2t_R@1": 69.8, "t2i_R@1": 55.9}}


POINTING, RETRIEVAL = {"accuracy": 2.0}, {"rsum": 1.0}


@pytest.mark.parametrize("results", [
    {"pointing": POINTING, "retrieval": RETRIEVAL},                                   # one test split: its metrics
    {"both_test": {"pointing": POINTING, "retrieval": RETRIEVAL}},                    # one split named
    {"captions_test": {"retrieval": RETRIEVAL}, "pointing_test": {"pointing": POINTING}, "other": {}},
])
def test_split_results_finds_both_tasks(results):
    assert split_results(results) == {"pointing": POINTING, "retrieval": RETRIEVAL}


def test_split_results_takes_the_last_split_that_has_a_task():
    results = {"a": {"pointing": {"accuracy": 1.0}, "retrieval": RETRIEVAL}, "b": {"pointing": POINTING}}
    assert split_results(results) == {"pointing": POINTING, "retrieval": RETRIEVAL}


@pytest.mark.parametrize("results, message", [
    ({"pointing": POINTING, "captions_test": {"retrieval": RETRIEVAL}},   # top-level metrics: splits are not read
     "the run's results have no ['retrieval'] metrics (test splits: ['captions_test', 'pointing'])"),
    ({"retrieval": RETRIEVAL, "pointing_test": {"pointing": POINTING}},
     "the run's results have no ['pointing'] metrics (test splits: ['pointing_test', 'retrieval'])"),
    ({"b_test": {"bbox": {}}, "a_test": {}},
     "the run's results have no ['pointing', 'retrieval'] metrics (test splits: ['a_test', 'b_test'])"),
    ({}, "the run's results have no ['pointing', 'retrieval'] metrics (test splits: [])"),
])
def test_split_results_names_what_is_missing(results, message):
    with pytest.raises(KeyError) as e:
        split_results(results)
    assert e.value.args == (message,)


def _seeded(acc, centre, recalls):
    return {"pointing": {"accuracy": acc, "centre_accuracy": centre},
            "retrieval": dict(zip(("i2t_R@1", "i2t_R@5", "i2t_R@10", "t2i_R@1", "t2i_R@5", "t2i_R@10"), recalls))}


def test_the_whole_table():
    """Header in COLUMNS' order; mean ± sample sd of each column (a single seed: the mean alone); "nan"
    minutes for a model without a run time."""
    runs = {"dsve_loc": [_seeded(20, 12, (10, 30, 50, 5, 20, 40)), _seeded(10, 14, (12, 32, 54, 6, 22, 44))],
            "dsve_loc_gap": [_seeded(18, 12, (8, 1, 3, 5, 2, 4))]}
    assert format_table(runs, {"dsve_loc": 4.5}) == (
        "| model | pointing acc. | centre baseline | i2t R@1 | i2t R@5 | i2t R@10 | t2i R@1 | t2i R@5 | t2i R@10 "
        "| minutes per run |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
        "| dsve_loc | 15.0 ± 7.1 | 13.0 ± 1.4 | 11.0 ± 1.4 | 31.0 ± 1.4 | 52.0 ± 2.8 | 5.5 ± 0.7 | 21.0 ± 1.4 "
        "| 42.0 ± 2.8 | 4.5 |\n"
        "| dsve_loc_gap | 18.0 | 12.0 | 8.0 | 1.0 | 3.0 | 5.0 | 2.0 | 4.0 | nan |")
