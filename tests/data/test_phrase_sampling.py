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
    np.testing.assert_allclose(sampling_weights([0, 3], "ifs"), [0.75, 0.25])  # (1, 3): 1 - 1/4, 1 - 3/4
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


def test_default_mode_is_uniform():
    np.testing.assert_allclose(sampling_weights([10, 30, 60]), [1 / 3] * 3)


def test_weights_are_float64_whatever_the_counts_dtype():
    w = sampling_weights(np.array([15, 5], dtype=np.float32), "ifs")
    assert w.dtype == np.float64
    np.testing.assert_allclose(w, [0.25, 0.75], rtol=1e-12)


class _RecordingRng:
    """A numpy Generator that records the probabilities of every draw."""

    def __init__(self):
        self.rng, self.p = np.random.default_rng(0), []

    def choice(self, n, size, replace, p):
        self.p.append(None if p is None else p.tolist())
        return self.rng.choice(n, size=size, replace=replace, p=p)


COUNTS = {"a": 10, "b": 30, "c": 60, "x": 10, "y": 30, "z": 60}


@pytest.mark.parametrize("gt, aug, weighting, p", [
    (["a", "b", "c"], [], "inverse", [6 / 9, 2 / 9, 1 / 9]),  # too many gt phrases: they are drawn
    (["a"], ["x", "y", "z"], "one_minus_share", [0.45, 0.35, 0.20]),  # 1 gt kept, 1 of 3 augmented drawn
    (["a"], ["x", "y", "z"], "inverse", [6 / 9, 2 / 9, 1 / 9]),
])
def test_choose_phrases_draws_with_the_ifs_weights(gt, aug, weighting, p):
    rng = _RecordingRng()
    choose_phrases(gt, aug, 2 if aug else 1, COUNTS.get, rng, "ifs", weighting)
    assert len(rng.p) == 1
    np.testing.assert_allclose(rng.p[0], p)


def test_no_augmented_phrase_to_fill_the_budget():
    class NoDraw:
        def choice(self, *args, **kwargs):
            raise AssertionError("nothing to draw")

    assert choose_phrases(["a"], [], 3, COUNTS.get, NoDraw()) == (["a"], [])
