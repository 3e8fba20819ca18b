"""Retrieval ranks: hand-computed ties (pessimistic, both directions), uneven caption counts, NaN,
chunk-size invariance, a custom scorer, and agreement with a direct transcription of the definition."""
import numpy as np
import pytest
import torch

from phrasedet.evaluation import DotProductScorer, ranks_from_similarity, retrieval_ranks

from .retrieval_toy import NegativeSquaredDistance

# 3 images with 1, 3 and 0 captions: caption 0 is image 0's, captions 1-3 image 1's.
C2I = np.array([0, 1, 1, 1])
SIM = np.array([
    # cap0  cap1  cap2  cap3
    [0.50, 0.50, 0.20, 0.90],  # image 0: own 0.5; cap1 ties it, cap3 beats it -> rank 3
    [0.60, 0.70, 0.70, 0.10],  # image 1: own best 0.7 twice (no count against each other); cap0 below -> rank 1
    [0.90, 0.70, 0.90, 0.10],  # image 2: no caption, no image query; in the gallery of every caption query
])
# text -> image, column by column: cap0 0.5 < 0.6, 0.9 -> 3; cap1 0.7 tied by image 2 -> 2;
# cap2 0.7 < 0.9 -> 2; cap3 0.1 < 0.9 and tied by image 2 -> 3
I2T, T2I = [3, 1], [3, 2, 2, 3]


def reference_ranks(sim, c2i):
    """The definition, one query at a time (pessimistic ties, NaN ahead, own captions excluded)."""
    sim, c2i = np.asarray(sim, dtype=np.float64), np.asarray(c2i)
    i2t = []
    for i in range(sim.shape[0]):
        own = c2i == i
        if own.any():
            best = sim[i, own].max() if not np.isnan(sim[i, own]).any() else np.nan
            i2t.append(1 + sum(not (s < best) for s in sim[i, ~own]))
    t2i = [1 + sum(not (sim[i, j] < sim[c2i[j], j]) for i in range(sim.shape[0]) if i != c2i[j])
           for j in range(sim.shape[1])]
    return np.array(i2t, dtype=np.int64), np.array(t2i, dtype=np.int64)


def random_case(num_images, counts_high, seed, levels=4):
    """Random scores on a coarse grid (many ties) and 0..counts_high captions per image."""
    rng = np.random.default_rng(seed)
    c2i = np.repeat(np.arange(num_images), rng.integers(0, counts_high + 1, num_images))
    return rng.integers(0, levels, (num_images, len(c2i))).astype(np.float32), c2i


def test_hand_computed_ties_and_uneven_captions():
    i2t, t2i = ranks_from_similarity(SIM, C2I)
    assert i2t.tolist() == I2T and t2i.tolist() == T2I
    assert i2t.dtype == t2i.dtype == np.int64
    assert [r.tolist() for r in reference_ranks(SIM, C2I)] == [I2T, T2I]


def test_captions_need_not_be_grouped_by_image():
    perm = np.array([2, 0, 3, 1])  # the same captions in another order
    i2t, t2i = ranks_from_similarity(SIM[:, perm], C2I[perm])
    assert i2t.tolist() == I2T and t2i.tolist() == np.array(T2I)[perm].tolist()


def test_a_constant_model_gets_the_worst_ranks():
    i2t, t2i = ranks_from_similarity(np.full(SIM.shape, 0.25), C2I)
    assert i2t.tolist() == [4, 2]  # every other image's caption ties, hence ranks ahead
    assert t2i.tolist() == [3, 3, 3, 3]


def test_nan_counts_ahead_and_a_nan_ground_truth_ranks_last():
    sim = SIM.copy()
    sim[1, 0] = np.nan  # was below image 1's best own caption: now ahead of it
    sim[0, 2] = np.nan  # was below caption 2's image: now ahead of it
    sim[0, 0] = np.nan  # image 0's only ground truth: worst rank both ways
    i2t, t2i = ranks_from_similarity(sim, C2I)
    assert i2t.tolist() == [4, 2]
    assert t2i.tolist() == [3, 2, 3, 3]
    assert [r.tolist() for r in reference_ranks(sim, C2I)] == [i2t.tolist(), t2i.tolist()]


def test_the_ground_truth_score_is_given_not_looked_up():
    """A paired score a rounding step above the matrix entry changes nothing but the comparisons
    with other images: the own entry is excluded by index, never compared."""
    gt = SIM[C2I, np.arange(4)]
    _, t2i = ranks_from_similarity(SIM, C2I, gt_scores=np.nextafter(gt, np.inf))
    assert t2i.tolist() == [3, 1, 2, 2]  # ties with image 2 (caption 1, caption 3) are broken
    _, t2i = ranks_from_similarity(SIM, C2I, gt_scores=np.nextafter(gt, -np.inf))
    assert t2i.tolist() == T2I


@pytest.mark.parametrize("seed", range(6))
def test_agrees_with_the_definition_on_random_ties(seed):
    sim, c2i = random_case(num_images=9, counts_high=3, seed=seed)
    for chunk in (1, 3, 1000):
        ours = ranks_from_similarity(sim, c2i, chunk_size=chunk)
        expected = reference_ranks(sim, c2i)
        assert ours[0].tolist() == expected[0].tolist() and ours[1].tolist() == expected[1].tolist()


def test_chunk_size_does_not_change_embedding_ranks():
    rng = np.random.default_rng(0)
    images = rng.integers(-3, 4, (23, 8)).astype(np.float32)  # small integers: exact dot products, many ties
    c2i = np.repeat(np.arange(23), rng.integers(0, 4, 23))
    captions = images[c2i] + rng.integers(-2, 3, (len(c2i), 8)).astype(np.float32)
    ranks = [retrieval_ranks(images, captions, c2i, chunk_size=c) for c in (1, 3, 1000)]
    for i2t, t2i in ranks[1:]:
        assert np.array_equal(i2t, ranks[0][0]) and np.array_equal(t2i, ranks[0][1])
    sim = images.astype(np.float64) @ captions.T.astype(np.float64)
    assert [r.tolist() for r in ranks[0]] == [r.tolist() for r in reference_ranks(sim, c2i)]
    assert len(ranks[0][0]) == len(np.unique(c2i)) < 23  # images without captions are no queries


def test_a_custom_scorer_equals_its_similarity_matrix():
    rng = np.random.default_rng(1)
    images = torch.as_tensor(rng.integers(0, 3, (12, 5)), dtype=torch.float32)
    c2i = np.repeat(np.arange(12), rng.integers(0, 4, 12))
    captions = torch.as_tensor(rng.integers(0, 3, (len(c2i), 5)), dtype=torch.float32)
    scorer = NegativeSquaredDistance()
    sim = scorer.pairwise(images, captions).numpy()
    by_scorer = retrieval_ranks(images, captions, c2i, scorer=scorer, chunk_size=5)
    by_matrix = ranks_from_similarity(sim, c2i, chunk_size=7)
    assert [r.tolist() for r in by_scorer] == [r.tolist() for r in by_matrix]
    dot = retrieval_ranks(images, captions, c2i, scorer=DotProductScorer())
    assert [r.tolist() for r in dot] != [r.tolist() for r in by_scorer]  # the scorer is really used


def test_bad_inputs_are_errors():
    with pytest.raises(ValueError, match=r"caption_to_image has 3 entries for 4 captions"):
        ranks_from_similarity(SIM, C2I[:3])
    with pytest.raises(ValueError, match=r"values must lie in \[0, 3\).*to 3"):
        ranks_from_similarity(SIM, np.array([0, 1, 1, 3]))
    with pytest.raises(ValueError, match="different embedding sizes"):
        retrieval_ranks(np.zeros((3, 4)), np.zeros((4, 5)), C2I)
    with pytest.raises(ValueError, match=r"returned scores of shape \(3, 3\), expected \(3, 4\)"):
        class Broken(DotProductScorer):
            def pairwise(self, images, captions):
                return super().pairwise(images, captions)[:, :3]
        retrieval_ranks(np.zeros((3, 4)), np.zeros((4, 4)), C2I, scorer=Broken())
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        ranks_from_similarity(SIM, C2I, chunk_size=0)
