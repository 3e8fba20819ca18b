"""Paper 004's verdicts from hand-made runs, and reading train_net's results of two test splits."""
import pytest

from phrasedet.engine.pointing_claims import claim_verdicts, format_table, r1_sum, split_results


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
