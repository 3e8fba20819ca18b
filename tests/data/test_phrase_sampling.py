import numpy as np
import pytest

from phrasedet.data.phrase_sampling import choose_phrases, sampling_weights


def test_ifs_weights_by_hand():
    # the paper's example: dog 15 %, terrier 5 % -> P(terrier) = 1 - 0.15/0.20 = 0.75
    np.testing.assert_allclose(sampling_weights([15, 5], "ifs"), [0.25, 0.75])
    # three candidates: 1 - f/sum f = (0.9, 0.7, 0.4), renormalized by 2.0
    np.testing.assert_allclose(sampling_weights([10, 30, 60], "ifs"), [0.45, 0.35, 0.20])
    # inverse: 1/10 : 1/30 : 1/60 = 6 : 2 : 1
    np.testing.assert_allclose(sampling_weights([10, 30, 60], "ifs", "inverse"), [6 / 9, 2 / 9, 1 / 9])
    np.testing.assert_allclose(sampling_weights([10, 30, 60], "uniform"), [1 / 3] * 3)
    np.testing.assert_allclose(sampling_weights([0, 0], "ifs"), [0.5, 0.5])  # unseen counts as 1
    np.testing.assert_allclose(sampling_weights([7], "ifs"), [1.0])


def test_bad_mode_names_the_key():
    with pytest.raises(ValueError, match="INPUT.PHRASES.SAMPLING"):
        sampling_weights([1], "random")
    with pytest.raises(ValueError, match="INPUT.PHRASES.IFS_WEIGHTING"):
        sampling_weights([1], "ifs", "sqrt")


def test_all_gt_kept_when_they_fit_and_augmented_fill_the_budget():
    rng = np.random.default_rng(0)
    gt, aug = choose_phrases(["a", "b"], ["x", "y", "z"], 4, lambda p: 1, rng)
    assert gt == ["a", "b"] and len(aug) == 2 and set(aug) <= {"x", "y", "z"}
    gt, aug = choose_phrases(["a", "b", "c", "d", "e", "f", "g"], ["x"], 5, lambda p: 1, rng)
    assert len(gt) == 5 and len(set(gt)) == 5 and aug == []


def test_ifs_prefers_rare_phrases():
    rng = np.random.default_rng(0)
    counts = {"rare": 1, "common": 1000}
    picks = [choose_phrases(["common", "rare"], [], 1, counts.get, rng, "ifs")[0][0] for _ in range(2000)]
    uniform = [choose_phrases(["common", "rare"], [], 1, counts.get, rng)[0][0] for _ in range(2000)]
    assert picks.count("rare") > 1950  # p = 1000/1001
    assert 850 < uniform.count("rare") < 1150
