"""Retrieval boundaries (issue 14): Recall@K at ranks K - 1, K and K + 1, a tie exactly at rank K,
the best-ranked of several ground-truth captions, medr of even counts whose middle ranks are more
than one apart, and the F-fold protocol's fold boundaries (COCO 1K x 5 in miniature). Definitions:
docs/EVALUATION.md, "Ranks and ties", "Metrics" and "Protocols"."""
import numpy as np
import pytest

from phrasedet.evaluation import evaluate_similarity, ranks_from_similarity, recall_metrics

from .retrieval_toy import toy_arrays


# ----------------------------------------------------------------------------- Recall@K
# (K, rank, R@K): ranks K - 1, K and K + 1 (rank 0 is no 1-based rank: an error, tested elsewhere)
@pytest.mark.parametrize("k, rank, expected", [
    (1, 1, 100.0), (1, 2, 0.0),
    (5, 4, 100.0), (5, 5, 100.0), (5, 6, 0.0),
    (10, 9, 100.0), (10, 10, 100.0), (10, 11, 0.0),
])
def test_recall_at_k_for_one_query_at_rank_k_minus_1_k_and_k_plus_1(k, rank, expected):
    m = recall_metrics(np.array([rank]), np.array([rank]))  # "rank <= K": K is in, K + 1 is out
    assert m[f"i2t_R@{k}"] == m[f"t2i_R@{k}"] == expected


# ----------------------------------------------------------------------------- a tie at rank K
def _t2i_column(tied):
    """7 images, 1 caption (image 0's, ground truth 0.5): 4 other images above it, image 5 at
    ``tied``, image 6 below."""
    return np.array([[0.5], [0.9], [0.8], [0.7], [0.6], [tied], [0.4]]), np.array([0])


@pytest.mark.parametrize("tied, rank", [
    (np.nextafter(0.5, -np.inf), 5),  # one ulp below: not ahead -> rank 1 + 4 = 5 = K, an R@5 hit
    (0.5, 6),                          # exactly tied: ahead (pessimistic) -> rank 6 = K + 1, a miss
    (np.nextafter(0.5, np.inf), 6),    # one ulp above: ahead -> 6
])
def test_text_to_image_tie_at_rank_k_pushes_the_ground_truth_out(tied, rank):
    i2t, t2i = ranks_from_similarity(*_t2i_column(tied))
    assert t2i.tolist() == [rank] and i2t.tolist() == [1]  # images 1-6 have no caption: no image query
    assert recall_metrics(i2t, t2i)["t2i_R@5"] == (100.0 if rank <= 5 else 0.0)


def _i2t_row(tied, own=(0.3, 0.5)):
    """Image 0 has captions 0 and 1 (scores ``own``); images 1-6 one caption each (captions 2-7).
    Row 0 scores the other images' captions 0.9, 0.8, 0.7, 0.6 (4 above 0.5), ``tied``, 0.4."""
    sim = np.zeros((7, 8))
    sim[0] = [*own, 0.9, 0.8, 0.7, 0.6, tied, 0.4]
    return sim, np.array([0, 0, 1, 2, 3, 4, 5, 6])


@pytest.mark.parametrize("tied, rank", [
    (np.nextafter(0.5, -np.inf), 5),  # below the best own caption: rank 1 + 4 = 5
    (0.5, 6),                          # tied with it: ahead -> 6
    (np.nextafter(0.5, np.inf), 6),
])
def test_image_to_text_best_own_caption_and_a_tie_at_rank_k(tied, rank):
    # the best own caption (0.5) is the SECOND one: ranking the first (0.3) would give
    # 1 + 6 (0.9, 0.8, 0.7, 0.6, tied, 0.4 are all >= 0.3) = 7. Own captions never count: counting
    # the best one against itself (0.5 >= 0.5) would give 7 too.
    i2t, _ = ranks_from_similarity(*_i2t_row(tied))
    assert i2t[0] == rank
    assert recall_metrics(i2t[:1], np.array([1]))["i2t_R@5"] == (100.0 if rank <= 5 else 0.0)


def test_image_to_text_own_captions_tied_with_each_other_and_with_another_image():
    # both own captions at 0.5 (a tie between ground truths does not count) and the other
    # image 5's caption (column 6) at 0.5 (a tie with the ground truth counts): 1 + 4 + 1 = 6
    i2t, _ = ranks_from_similarity(*_i2t_row(0.5, own=(0.5, 0.5)))
    assert i2t[0] == 6
    # the worse own caption one ulp below the best: still not counted -> 6
    i2t, _ = ranks_from_similarity(*_i2t_row(0.5, own=(np.nextafter(0.5, -np.inf), 0.5)))
    assert i2t[0] == 6


# ----------------------------------------------------------------------------- medr
@pytest.mark.parametrize("ranks, medr", [
    # even counts whose two middle ranks are 3 apart: only "mean of the two middles, rounded down"
    # gives these. 1-based [1, 4] -> 0-based [0, 3] -> median 1.5 -> floor 1 -> medr 2
    # (lower middle -> 1, upper middle -> 4, no floor -> 2.5, ceil or round-half-even -> 3)
    ([1, 4], 2.0),
    # 0-based [0, 1, 4, 8] -> middles 1 and 4 -> 2.5 -> 2 -> medr 3 (lower 2, upper 5, round 3 too;
    # no floor 3.5)
    ([9, 1, 5, 2], 3.0),
    # middles 0-based 1 and 5 -> 3.0 exactly -> medr 4 (lower 2, upper 6)
    ([2, 6, 1, 7], 4.0),
    # odd count: the middle one, 0-based 3 -> medr 4 (not the mean 5.4 nor the mean of two)
    ([1, 2, 4, 10, 10], 4.0),
])
def test_medr_of_even_and_odd_counts(ranks, medr):
    m = recall_metrics(np.array(ranks), np.array(ranks))
    assert m["i2t_medr"] == m["t2i_medr"] == medr


# ----------------------------------------------------------------------------- F folds
X = 5.0  # every entry across folds: above every in-fold score, so a fold that read one would change
PERFECT = [[0.9, 0.1], [0.2, 0.8]]  # own scores beat the other image both ways: ranks [1, 1]
SWAPPED = [[0.1, 0.9], [0.8, 0.2]]  # the other image wins both ways: ranks [2, 2]


def _five_folds_matrix():
    """10 images, 1 caption each (caption j is image j's); 5 folds of 2 consecutive images: folds
    0-3 SWAPPED, the LAST fold (images 8-9) PERFECT."""
    sim = np.full((10, 10), X)
    for f in range(5):
        sim[2 * f:2 * f + 2, 2 * f:2 * f + 2] = PERFECT if f == 4 else SWAPPED
    return sim, np.arange(10)


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 10])  # 3: row blocks straddle fold boundaries
def test_five_folds_of_consecutive_images_average_every_metric(chunk_size):
    sim, c2i = _five_folds_matrix()
    results = evaluate_similarity(sim, c2i, folds=(1, 5), chunk_size=chunk_size)
    # 5 folds: per fold, swapped ranks [2, 2] (R@1 0, medr 2, meanr 2), perfect [1, 1] (R@1 100,
    # medr 1, meanr 1): averaged R@1 (0 x 4 + 100) / 5 = 20, medr = meanr = (2 x 4 + 1) / 5 = 1.8
    # (the doc's "fractional medians such as 1.8"); R@5 = R@10 = 100; rsum 2 x (20 + 100 + 100) = 440
    per_dir = {"R@1": 20.0, "R@5": 100.0, "R@10": 100.0, "medr": 1.8, "meanr": 1.8}
    expected = {f"{d}_{k}": v for d in ("i2t", "t2i") for k, v in per_dir.items()}
    assert results["retrieval_5fold"] == pytest.approx({**expected, "rsum": 440.0}, abs=1e-12)
    # whole split: the 8 X of other folds rank ahead of every ground truth; in a swapped fold the
    # in-fold other item too -> rank 10 (8 images x 1 query each way), in the perfect fold 9.
    # R@10 counts rank exactly 10: 100; R@5 = R@1 = 0; 0-based [8, 8, 9 x 8] -> median 9 -> medr 10;
    # meanr (8 x 10 + 2 x 9) / 10 = 9.8; rsum 100 + 100 = 200
    per_dir = {"R@1": 0.0, "R@5": 0.0, "R@10": 100.0, "medr": 10.0, "meanr": 9.8}
    expected = {f"{d}_{k}": v for d in ("i2t", "t2i") for k, v in per_dir.items()}
    assert results["retrieval"] == pytest.approx({**expected, "rsum": 200.0}, abs=1e-12)


def _fold_by_hand(sim, c2i, first, end):
    """The metrics of images [first, end) and their captions alone (the definition of a fold)."""
    cols = np.flatnonzero((c2i >= first) & (c2i < end))
    return recall_metrics(*ranks_from_similarity(sim[first:end][:, cols], c2i[cols] - first))


@pytest.mark.parametrize("folds", [4, 6])
def test_folds_with_uneven_captions_are_consecutive_image_slices(folds):
    # retrieval_toy: 12 images with caption counts [2, 1, 0, 3, 2, 2, 1, 1, 2, 0, 3, 1]. With 4 folds
    # the boundaries are images 2|3, 5|6, 8|9 (image 9, without captions, opens the last fold); with
    # 6 folds image 2 (no captions) opens fold 1.
    images, captions, c2i = toy_arrays()
    sim = images.astype(np.float64) @ captions.T.astype(np.float64)  # multiples of 1/16: exact
    size = 12 // folds
    per_fold = [_fold_by_hand(sim, c2i, f * size, (f + 1) * size) for f in range(folds)]
    expected = {k: float(np.mean([m[k] for m in per_fold])) for k in per_fold[0]}
    assert evaluate_similarity(sim, c2i, folds=folds, chunk_size=5)[f"retrieval_{folds}fold"] == \
        pytest.approx(expected, abs=1e-12)
    # the folds are not all alike, so a shifted boundary would show
    assert len({m["rsum"] for m in per_fold}) > 1
