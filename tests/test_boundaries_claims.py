"""Claim-verdict boundaries (issue 14): "the mean over the seeds has the paper's sign and at least
half of the seeds agree" (docs/RETRIEVAL.md step 5, docs/POINTING.md) at a mean of exactly zero,
exactly half of the seeds agreeing (1 of 2, 2 of 4) and one fewer, and a seed with a difference of
exactly zero (no agreement), through both families' ``claim_verdicts``."""
import math
import warnings

import pytest

from phrasedet.engine.comparison import pointing_claims, retrieval_claims
from phrasedet.engine.comparison.claims import cell, difference, holds, mean_sd, signed, verdict

# (per-seed differences, holds): every difference and mean is exact in float64
CASES = [
    ([1.0, 1.0, -2.0], False),       # mean exactly 0 with 2 of 3 seeds agreeing: the mean alone fails
    ([1.0, 1.0, -1.5], True),        # mean +1/6 > 0, 2 of 3
    ([1.0, 1.0, -2.5], False),       # mean -1/6 < 0, 2 of 3
    ([10.0, -1.0], True),            # 1 of 2: exactly half -> holds (mean +4.5)
    ([10.0, 10.0, -1.0, -1.0], True),   # 2 of 4: exactly half -> holds (mean +4.5)
    ([10.0, -1.0, -1.0, -1.0], False),  # 1 of 4: one fewer than half -> fails although the mean is +1.75
    ([10.0, -1.0, -1.0], False),     # 1 of 3 (half is 1.5): fails although the mean is +8/3
    ([0.0, 0.0, 3.0], False),        # a difference of 0 does not agree: 1 of 3 (mean +1)
    ([0.0, 3.0], True),              # 1 of 2 (the 0 does not count, nor against)
    ([0.0, 0.0, 3.0, 3.0], True),    # 2 of 4
    ([0.0, 0.0, 0.0, 3.0], False),   # 1 of 4 (mean +0.75)
]


@pytest.mark.parametrize("diffs, expected", CASES)
def test_holds_at_the_boundaries(diffs, expected):
    assert holds(diffs) is expected


def _m(rsum):
    return {**{k: 0.0 for k in retrieval_claims.RECALLS}, "rsum": rsum}


@pytest.mark.parametrize("diffs, expected", CASES)
def test_retrieval_verdict_at_the_boundaries(diffs, expected):
    # VSE++ vs VSE0 on rsum: vse0 at 300 in every seed, vsepp 300 + the difference
    runs = {"vse0": [_m(300.0) for _ in diffs], "vsepp": [_m(300.0 + d) for d in diffs]}
    (v,) = retrieval_claims.claim_verdicts(runs)
    assert v["per_seed"] == diffs and v["holds"] is expected
    won = sum(d > 0 for d in diffs)  # strictly positive seeds, as the text reports them
    assert ("HOLDS here" if expected else "DOES NOT HOLD here") in v["text"]
    assert f"{won}/{len(diffs)} seeds" in v["text"]


def test_retrieval_verdict_text_at_exactly_half():
    (v,) = retrieval_claims.claim_verdicts({"vse0": [_m(300.0)] * 4,
                                            "vsepp": [_m(310.0), _m(310.0), _m(299.0), _m(299.0)]})
    assert "HOLDS here: mean +4.5 rsum, 2/4 seeds (+10.0, +10.0, -1.0, -1.0)" in v["text"]
    (v,) = retrieval_claims.claim_verdicts({"vse0": [_m(300.0)] * 3, "vsepp": [_m(300.0), _m(300.0), _m(303.0)]})
    assert "DOES NOT HOLD here: mean +1.0 rsum, 1/3 seeds (+0.0, +0.0, +3.0)" in v["text"]


GAIN = "002: the gain of max over sum is larger with a fine-tuned CNN"


def _gain(vsepp_ft):
    # frozen: vsepp - vse0 = -10 in both seeds; tuned: vsepp_ft - 100; gap = tuned - frozen
    runs = {"vse0": [_m(100.0)] * 2, "vsepp": [_m(90.0)] * 2, "vse0_ft": [_m(100.0)] * 2,
            "vsepp_ft": [_m(v) for v in vsepp_ft]}
    return {v["claim"]: v for v in retrieval_claims.claim_verdicts(runs)}[GAIN]


def test_a_larger_gain_needs_a_gain_whose_mean_is_above_exactly_zero():
    # tuned [+5, -5]: mean exactly 0, 1 of 2 -> no gain; the gap [+15, +5] alone would hold
    v = _gain([105.0, 95.0])
    assert v["per_seed"] == [15.0, 5.0] and not v["holds"] and "there is no gain to compare" in v["text"]
    # tuned [+10, -1]: mean +4.5, exactly half of the seeds -> a gain; the gap [+20, +9] holds
    v = _gain([110.0, 99.0])
    assert v["per_seed"] == [20.0, 9.0] and v["holds"] and "there is no gain to compare" not in v["text"]


def _run(acc, centre, i2t, t2i):
    recalls = {"i2t_R@1": i2t, "i2t_R@5": 0.0, "i2t_R@10": 0.0, "t2i_R@1": t2i, "t2i_R@5": 0.0, "t2i_R@10": 0.0}
    return {"pointing": {"accuracy": acc, "centre_accuracy": centre}, "retrieval": recalls}


def test_pointing_verdicts_at_the_boundaries():
    # four seeds; dsve_loc: R@1 10 + 10 = 20 in every seed
    runs = {"dsve_loc": [_run(30.0, 20.0, 10.0, 10.0), _run(30.0, 20.0, 10.0, 10.0),
                         _run(19.0, 20.0, 10.0, 10.0), _run(19.0, 20.0, 10.0, 10.0)],
            "dsve_loc_gap": [_run(20.0, 20.0, 9.0, 10.0), _run(31.0, 20.0, 10.0, 9.0),
                             _run(20.0, 20.0, 9.5, 9.5), _run(20.0, 20.0, 12.0, 11.0)],
            "dsve_loc_sum": [_run(0.0, 20.0, 10.0, 10.0), _run(0.0, 20.0, 5.0, 15.0),
                             _run(0.0, 20.0, 10.0, 10.0), _run(0.0, 20.0, 7.5, 7.5)]}
    v = {x["claim"].split(": ", 1)[1]: x for x in pointing_claims.claim_verdicts(runs)}
    # accuracy - centre: [+10, +10, -1, -1]: 2 of 4 (exactly half), mean +4.5 -> holds
    centre = v["DSVE-loc beats the centre baseline on the pointing game"]
    assert centre["per_seed"] == [10.0, 10.0, -1.0, -1.0] and centre["holds"]
    assert "HOLDS here: mean +4.5 points of accuracy, 2/4 seeds" in centre["text"]
    # accuracy vs gap: [+10, -1, -1, -1]: 1 of 4 (one fewer than half), mean +1.75 -> does not hold
    pooling = v["WELDON pooling beats average pooling on the pointing game"]
    assert pooling["per_seed"] == [10.0, -1.0, -1.0, -1.0] and not pooling["holds"]
    # R@1 sums 20 vs [19, 19, 19, 23]: [+1, +1, +1, -3]: 3 of 4 but a mean of exactly 0 -> does not hold
    r1 = v["WELDON pooling beats average pooling on retrieval"]
    assert r1["per_seed"] == [1.0, 1.0, 1.0, -3.0] and r1["mean"] == 0.0 and not r1["holds"]
    # R@1 sums 20 vs [20, 20, 20, 15]: [0, 0, 0, +5]: ties do not agree -> 1 of 4, does not hold
    hard = v["hard negatives beat the sum over negatives on retrieval"]
    assert hard["per_seed"] == [0.0, 0.0, 0.0, 5.0] and not hard["holds"]
    assert "1/4 seeds (+0.0, +0.0, +0.0, +5.0)" in hard["text"]


def test_pointing_verdicts_of_two_seeds_one_agreeing():
    # accuracy - centre [+2, -1] (1 of 2, mean +0.5) holds; [+1, -1] (1 of 2, mean exactly 0) does not
    holds_runs = {"dsve_loc": [_run(22.0, 20.0, 0.0, 0.0), _run(19.0, 20.0, 0.0, 0.0)]}
    (v,) = pointing_claims.claim_verdicts(holds_runs)
    assert v["per_seed"] == [2.0, -1.0] and v["holds"]
    (v,) = pointing_claims.claim_verdicts({"dsve_loc": [_run(21.0, 20.0, 0.0, 0.0), _run(19.0, 20.0, 0.0, 0.0)]})
    assert v["per_seed"] == [1.0, -1.0] and v["mean"] == 0.0 and not v["holds"]


# ----------------------------------------------------------------------------- phrasedet/engine/comparison/claims.py directly
def test_difference_refuses_runs_of_different_seeds_naming_both_models():
    runs = {"vsepp": [{"rsum": 1.0}] * 3, "vse0": [{"rsum": 1.0}] * 2}
    with pytest.raises(ValueError) as e:
        difference(runs, "vsepp", "vse0", "rsum")
    assert str(e.value) == "vsepp has 3 runs and vse0 2: compare the same seeds"


def test_difference_is_seed_by_seed_on_the_given_key():
    runs = {"a": [{"r": 5.0, "s": 0.0}, {"r": 1.0, "s": 0.0}], "b": [{"r": 2.0, "s": 9.0}, {"r": 4.0, "s": 9.0}]}
    assert difference(runs, "a", "b", "r") == [3.0, -3.0]


def test_verdict_record_and_sentence():
    # [+2, -1, +0.5]: mean +0.5, 2 of 3 seeds
    v = verdict("claim X", "+1.0 (Table 9)", [2.0, -1.0, 0.5], "pts", "; more")
    assert v == {"claim": "claim X", "holds": True, "mean": 0.5, "per_seed": [2.0, -1.0, 0.5],
                 "text": "claim X: HOLDS here: mean +0.5 pts, 2/3 seeds (+2.0, -1.0, +0.5); more; paper +1.0 (Table 9)."}
    assert verdict("claim Y", "+4", [-2.0], "pts")["text"] == \
        "claim Y: DOES NOT HOLD here: mean -2.0 pts, 0/1 seeds (-2.0); paper +4."


def test_a_gain_too_small_for_one_decimal_is_printed_with_two():
    # phrase filtering's +0.02 counts as a gain under the rule: printing it "+0.0" hid that
    assert [signed(d) for d in (0.02, -0.04, 0.05, -0.06, 0.0, 2.0)] == ["+0.02", "-0.04", "+0.1", "-0.1", "+0.0", "+2.0"]
    assert verdict("claim Z", "+1.3", [0.02, 0.01, 0.03], "mAP")["text"] == \
        "claim Z: HOLDS here: mean +0.02 mAP, 3/3 seeds (+0.02, +0.01, +0.03); paper +1.3."


@pytest.mark.parametrize("values, mean, sd, text", [
    ([1.0, 2.0, 3.0, 4.0], 2.5, (5 / 3) ** 0.5, "2.5 ± 1.3"),   # sample sd: sqrt(5/3) = 1.29
    ([1.0, 3.0], 2.0, 2 ** 0.5, "2.0 ± 1.4"),
    ([5.0], 5.0, None, "5.0"),                                  # one value: no spread
])
def test_mean_sd_and_cell(values, mean, sd, text):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one value: NaN by design, not numpy's "degrees of freedom <= 0" warning
        m, s = mean_sd(values)
    assert m == mean and (math.isnan(s) if sd is None else s == pytest.approx(sd))
    assert cell(values) == text
