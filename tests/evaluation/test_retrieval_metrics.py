"""Recall@K, median and mean rank, rsum, and the F-fold protocol, computed by hand."""
import math

import numpy as np
import pytest

from phrasedet.evaluation import METRIC_KEYS, evaluate_retrieval, evaluate_similarity, recall_metrics


def test_recall_at_k_counts_rank_k_and_not_k_plus_1():
    m = recall_metrics(np.array([1, 5, 6, 10, 11]), np.array([1, 2, 3, 10]))
    assert (m["i2t_R@1"], m["i2t_R@5"], m["i2t_R@10"]) == (20.0, 40.0, 80.0)
    assert (m["t2i_R@1"], m["t2i_R@5"], m["t2i_R@10"]) == (25.0, 75.0, 100.0)
    assert m["i2t_medr"] == 6.0 and m["i2t_meanr"] == 6.6  # 0-based median 5 -> 6; 33 / 5
    assert m["t2i_meanr"] == 4.0
    assert m["rsum"] == 20 + 40 + 80 + 25 + 75 + 100
    assert tuple(m) == METRIC_KEYS and all(isinstance(v, float) for v in m.values())


def test_median_of_an_even_number_of_queries_rounds_down():
    # 0-based [0, 1, 2, 9]: median 1.5 -> floor 1 -> medr 2 (not 2.5, not 3)
    assert recall_metrics(np.array([1]), np.array([1, 2, 3, 10]))["t2i_medr"] == 2.0
    # 0-based [0, 1]: median 0.5 -> medr 1
    assert recall_metrics(np.array([2, 1]), np.array([1]))["i2t_medr"] == 1.0
    # 0-based [1, 2]: median 1.5 -> medr 2
    assert recall_metrics(np.array([3, 2]), np.array([1]))["i2t_medr"] == 2.0


def test_no_query_gives_nan():
    m = recall_metrics(np.zeros(0, np.int64), np.array([1]))
    assert all(math.isnan(m[k]) for k in METRIC_KEYS if k.startswith("i2t")) and math.isnan(m["rsum"])


@pytest.mark.parametrize("i2t, t2i, message", [
    ([1], [0, 1], "t2i ranks must be a 1-D array of 1-based ranks (>= 1), got shape (2,) with minimum 0"),
    ([[1, 2]], [1], "i2t ranks must be a 1-D array of 1-based ranks (>= 1), got shape (1, 2) with minimum 1"),
    # an empty array of the wrong shape has no minimum to report
    (np.zeros((0, 3)), [1], "i2t ranks must be a 1-D array of 1-based ranks (>= 1), got shape (0, 3)"),
])
def test_bad_ranks_are_errors_naming_the_direction_and_shape(i2t, t2i, message):
    with pytest.raises(ValueError) as e:
        recall_metrics(np.asarray(i2t), np.asarray(t2i))
    assert str(e.value) == message


def test_mean_rank_is_computed_in_double_precision():
    # (1 + 2 + 2) / 3 = 5 / 3: a float32 mean of float32 ranks would give 1.6666666269302368
    ranks = np.array([1, 2, 2], dtype=np.float32)
    assert recall_metrics(ranks, ranks)["i2t_meanr"] == 5 / 3


# 4 images with captions [1, 1, 2, 1]; in 2 folds: images 0-1 with captions 0-1, images 2-3 with
# captions 2-4. Entries across folds (X) beat everything, so a fold that looked at them would change.
X = 5.0
C2I = np.array([0, 1, 2, 2, 3])
SIM = np.array([
    # c0    c1    c2    c3    c4
    [0.9, 0.8, X, X, X],  # fold 0: image 0 own 0.9 > 0.8 -> rank 1
    [0.95, 0.1, X, X, X],  # fold 0: image 1 own 0.1 < 0.95 -> rank 2
    [X, X, 0.8, 0.6, 0.4],  # fold 1: image 2 best own 0.8 > 0.4 -> rank 1
    [X, X, 0.7, 0.2, 0.3],  # fold 1: image 3 own 0.3 < 0.7 -> rank 2 (0.2 is below)
])
# text -> image. Fold 0: c0 0.9 < 0.95 -> 2, c1 0.1 < 0.8 -> 2. Fold 1: c2 0.8 > 0.7 -> 1,
# c3 0.6 > 0.2 -> 1, c4 0.3 < 0.4 -> 2.
FOLD_0 = recall_metrics(np.array([1, 2]), np.array([2, 2]))
FOLD_1 = recall_metrics(np.array([1, 2]), np.array([1, 1, 2]))


def test_two_folds_average_every_metric():
    m = evaluate_similarity(SIM, C2I, folds=2)["retrieval_2fold"]
    assert FOLD_0["t2i_medr"] == 2.0 and FOLD_1["t2i_medr"] == 1.0  # 0-based [0, 0, 1]: median 0
    expected = {"i2t_R@1": 50.0, "i2t_R@5": 100.0, "i2t_R@10": 100.0, "i2t_medr": 1.0, "i2t_meanr": 1.5,
                "t2i_R@1": (0 + 200 / 3) / 2, "t2i_R@5": 100.0, "t2i_R@10": 100.0,
                "t2i_medr": 1.5, "t2i_meanr": (2 + 4 / 3) / 2}  # fractional medr, as VSE++'s COCO 1K
    expected["rsum"] = sum(v for k, v in expected.items() if "_R@" in k)
    assert m == pytest.approx(expected, abs=1e-12)
    assert m == pytest.approx({k: (FOLD_0[k] + FOLD_1[k]) / 2 for k in METRIC_KEYS}, abs=1e-12)


def test_folds_of_captions_in_any_order():
    perm = np.array([3, 0, 4, 1, 2])  # fold 1's captions are no longer consecutive columns
    assert evaluate_similarity(SIM[:, perm], C2I[perm], folds=(1, 2)) == evaluate_similarity(SIM, C2I, folds=(1, 2))


def test_every_protocol_in_one_call():
    results = evaluate_similarity(SIM, C2I, folds=[1, 2, 4, 2])
    assert list(results) == ["retrieval", "retrieval_2fold", "retrieval_4fold"]
    whole = results["retrieval"]
    assert whole["i2t_R@1"] == 0.0  # the X entries rank ahead of every ground truth
    # 4 folds of 1 image: every query has a gallery of its own image (and captions) only
    assert results["retrieval_4fold"]["i2t_R@1"] == results["retrieval_4fold"]["t2i_R@1"] == 100.0


def test_embeddings_and_their_matrix_give_the_same_fold_numbers():
    rng = np.random.default_rng(0)
    images = rng.integers(-2, 3, (6, 4)).astype(np.float32)
    c2i = np.repeat(np.arange(6), [2, 1, 0, 3, 1, 2])
    captions = (images[c2i] + rng.integers(-1, 2, (len(c2i), 4))).astype(np.float32)
    sim = images @ captions.T
    assert evaluate_retrieval(images, captions, c2i, folds=(1, 2, 3), chunk_size=4) == \
        evaluate_similarity(sim, c2i, folds=(1, 2, 3), chunk_size=5)


@pytest.mark.parametrize("folds, message", [
    (3, "4 test images do not split into 3 folds of equal size (4 is not a multiple of 3)"),
    ([1, 0], "folds must be integers >= 1, got 0"),
    ([True], "folds must be integers >= 1, got True"),  # a bool is no fold count
    ([2.0], "folds must be integers >= 1, got 2.0"),
    ((), "folds is empty: give at least one protocol (1 = the whole test split)"),
])
def test_bad_folds_are_errors(folds, message):
    with pytest.raises(ValueError) as e:
        evaluate_similarity(SIM, C2I, folds=folds)
    assert str(e.value) == message


def test_a_fold_without_captions_and_fewer_captions_than_images():
    """4 images, 2 captions (images 0 and 1's): one block of all 4 rows holds more rows than
    columns, and the second of 2 folds (images 2-3) has no caption, hence no query at all."""
    sim = np.array([
        [0.9, 0.2],  # image 0: own 0.9 > 0.2 -> rank 1
        [0.3, 0.8],  # image 1: own 0.8 > 0.3 -> rank 1
        [0.5, 0.1],
        [0.1, 0.9],  # ties-or-beats caption 1's ground truth 0.8 in the whole split
    ])
    results = evaluate_similarity(sim, np.array([0, 1]), folds=(1, 2))
    # whole split: i2t [1, 1]; t2i caption 0 (0.9 beats 0.3, 0.5, 0.1) -> 1, caption 1 (0.9 >= 0.8) -> 2
    per_dir = {"i2t": (100.0, 100.0, 100.0, 1.0, 1.0), "t2i": (50.0, 100.0, 100.0, 1.0, 1.5)}
    expected = {f"{d}_{k}": v for d, vs in per_dir.items() for k, v in zip(("R@1", "R@5", "R@10", "medr", "meanr"), vs)}
    assert results["retrieval"] == {**expected, "rsum": 550.0}
    # the empty fold's metrics are NaN ("no query"), and so is their average
    assert all(math.isnan(v) for v in results["retrieval_2fold"].values())
