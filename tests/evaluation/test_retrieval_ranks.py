"""Retrieval ranks: hand-computed ties (pessimistic, both directions), uneven caption counts, NaN,
chunk-size invariance, a custom scorer, and agreement with a direct transcription of the definition."""
import numpy as np
import pytest
import torch

from phrasedet.evaluation import (DotProductScorer, RankCounter, check_caption_to_image, evaluate_blocks,
                                  evaluate_retrieval, evaluate_similarity, paired_scores, ranks_from_similarity,
                                  retrieval_ranks, score_blocks)
from phrasedet.evaluation.retrieval.scorers import as_embeddings, scorer_device

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


@pytest.mark.filterwarnings("error::RuntimeWarning")  # NaN is a documented input: no numpy warning
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


def test_a_given_ground_truth_reaches_the_protocol_metrics():
    gt = np.nextafter(SIM[C2I, np.arange(4)], np.inf)  # t2i ranks [3, 1, 2, 2] (see above), not T2I
    m = evaluate_similarity(SIM, C2I, gt_scores=gt)["retrieval"]
    assert (m["t2i_R@1"], m["t2i_meanr"]) == (25.0, 2.0)
    m = evaluate_similarity(SIM, C2I)["retrieval"]
    assert (m["t2i_R@1"], m["t2i_meanr"]) == (0.0, 2.5)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.longdouble])
def test_ranks_are_exact_in_the_precision_of_the_scores(dtype):
    """Image 0's own caption scores one ulp of ``dtype`` above 1, the other image's caption exactly
    1: the own caption wins (rank 1). Rounding the scores to a narrower type would make them tie,
    and a tie ranks ahead (rank 2)."""
    one = dtype(1)
    if dtype is np.longdouble and np.finfo(dtype).eps >= np.finfo(np.float64).eps:
        pytest.skip("long double is double on this platform")
    above = np.nextafter(one, dtype(2))
    sim = np.array([[above, one], [0, above]], dtype=dtype)
    i2t, t2i = ranks_from_similarity(sim, np.array([0, 1]))
    assert i2t.tolist() == [1, 1] and t2i.tolist() == [1, 1]


# ----------------------------------------------------------------------------- input errors
def _message(call, *args, **kwargs):
    with pytest.raises(ValueError) as e:
        call(*args, **kwargs)
    return str(e.value)


@pytest.mark.parametrize("c2i, num_captions, message", [
    ([0.0, 1.0], None, "caption_to_image must be a 1-D integer array, got dtype float64 and shape (2,)"),
    ([[0, 1]], None, "caption_to_image must be a 1-D integer array, got dtype int64 and shape (1, 2)"),
    ([0, 1, 1], 4, "caption_to_image has 3 entries for 4 captions"),
    ([0, 1, 1, 3], 4, "caption_to_image values must lie in [0, 3) (the number of images), got values from 0 to 3"),
    ([-1, 0], None, "caption_to_image values must lie in [0, 3) (the number of images), got values from -1 to 0"),
])
def test_bad_caption_to_image_messages(c2i, num_captions, message):
    assert _message(check_caption_to_image, np.array(c2i), 3, num_captions) == message


def test_an_empty_caption_to_image_of_any_dtype_is_no_caption():
    c2i = check_caption_to_image(np.array([]), 3, 0)  # np.array([]) is float64
    assert c2i.dtype == np.int64 and c2i.shape == (0,)


@pytest.mark.parametrize("sim, gt, message", [
    ([0.5, 0.2], None,
     "the similarity matrix must be a 2-D float array [images, captions], got dtype float64 and shape (2,)"),
    ([[1, 0], [0, 1]], None,
     "the similarity matrix must be a 2-D float array [images, captions], got dtype int64 and shape (2, 2)"),
    (SIM, [0.5, 0.7, 0.7], "gt_scores must have shape (4,) (one per caption), got (3,)"),
])
def test_bad_similarity_messages(sim, gt, message):
    assert _message(ranks_from_similarity, np.array(sim), C2I[:np.shape(sim)[-1]], gt_scores=gt) == message


class Broken(DotProductScorer):
    """Drops the last caption of ``pairwise`` or the last row of ``paired``."""

    def __init__(self, where):
        super().__init__()
        self.where = where

    def pairwise(self, images, captions):
        scores = super().pairwise(images, captions)
        return scores[:, :-1] if self.where == "pairwise" else scores

    def paired(self, images, captions):
        scores = super().paired(images, captions)
        return scores[:-1] if self.where == "paired" else scores


@pytest.mark.parametrize("images, captions, c2i, kwargs, message", [
    ((4,), (4, 4), C2I, {}, "images must be a matrix [rows, D], got shape (4,)"),
    ((3, 4), (4, 2, 2), C2I, {}, "captions must be a matrix [rows, D], got shape (4, 2, 2)"),
    ((3, 4), (5, 6), [0, 1, 1, 1, 1], {}, "images [3, 4] and captions [5, 6] have different embedding sizes"),
    ((3, 4), (4, 4), [0, 1, 1], {}, "caption_to_image has 3 entries for 4 captions"),
    # 3 images, 4 captions: image 3 is out of range even though there are 4 captions
    ((3, 4), (4, 4), [0, 1, 1, 3], {},
     "caption_to_image values must lie in [0, 3) (the number of images), got values from 0 to 3"),
    ((3, 4), (4, 4), C2I, {"chunk_size": 0}, "chunk_size must be >= 1, got 0"),
    ((3, 4), (4, 4), C2I, {"scorer": Broken("pairwise")},
     "Broken.pairwise returned scores of shape (3, 3), expected (3, 4)"),
    ((3, 4), (4, 4), C2I, {"scorer": Broken("paired")}, "Broken.paired returned scores of shape (3,), expected (4,)"),
])
def test_bad_embeddings_and_scorers_messages(images, captions, c2i, kwargs, message):
    assert _message(retrieval_ranks, np.zeros(images), np.zeros(captions), np.array(c2i), **kwargs) == message


@pytest.mark.parametrize("folds, message", [
    (1, "score blocks must come in row order: expected row 1, got 2"),
    (2, "score blocks covered 1 of 2 image rows"),  # row 1 closes fold 0: it notices at the end
])
def test_a_block_stream_missing_a_row_is_an_error(folds, message):
    sim = np.arange(16.0).reshape(4, 4)
    blocks = [(0, sim[:1]), (2, sim[2:])]  # row 1 is missing
    assert _message(evaluate_blocks, blocks, np.arange(4), 4, np.diag(sim), folds) == message


# ----------------------------------------------------------------------------- blocks and scorers
@pytest.fixture
def counted_blocks(monkeypatch):
    """Every score block handed to a RankCounter, in order."""
    seen, add = [], RankCounter.add

    def spy(self, first_row, scores):
        seen.append(scores)
        add(self, first_row, scores)

    monkeypatch.setattr(RankCounter, "add", spy)
    return seen


@pytest.mark.parametrize("evaluate, embedded", [
    (ranks_from_similarity, False), (evaluate_similarity, False), (retrieval_ranks, True), (evaluate_retrieval, True),
])
def test_the_default_block_is_1024_image_rows(counted_blocks, evaluate, embedded):
    images, captions, c2i = np.ones((1025, 1)), np.ones((1, 1)), np.array([0])
    if embedded:
        evaluate(images, captions, c2i)
    else:
        evaluate(images @ captions.T, c2i)
    assert [b.shape for b in counted_blocks] == [(1024, 1), (1, 1)]


def test_a_fold_of_consecutive_captions_reads_views_of_the_blocks(counted_blocks):
    # 3 folds of 1 image: captions [0] and [1, 2, 3] are consecutive columns (a slice, not a copy)
    evaluate_similarity(SIM, C2I, folds=3, chunk_size=2)
    assert [b.shape for b in counted_blocks] == [(1, 1), (1, 3), (1, 0)]
    assert all(np.shares_memory(b, SIM) for b in counted_blocks[:2])


class Recording(DotProductScorer):
    """The dot product, recording the rows, dtype and device of every call's inputs."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def pairwise(self, images, captions):
        self.calls.append(("pairwise", images.shape[0], images.dtype, captions.dtype, images.device.type))
        return super().pairwise(images, captions)

    def paired(self, images, captions):
        self.calls.append(("paired", images.shape[0], images.dtype, captions.dtype, images.device.type))
        return super().paired(images, captions)


def test_ground_truth_scores_come_in_blocks_of_1024_captions_whatever_the_chunk_size():
    scorer = Recording()
    captions = np.arange(1025.0)[:, None]  # caption j scores j with its image (1.0)
    gt = paired_scores(torch.ones(1, 1), torch.as_tensor(captions, dtype=torch.float32), np.zeros(1025, np.int64),
                       scorer)
    assert [c[:2] for c in scorer.calls] == [("paired", 1024), ("paired", 1)]
    assert gt.tolist() == list(range(1025))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint16, np.int32, np.int64])
def test_paired_scores_take_caption_to_image_of_any_integer_dtype(dtype):
    images, captions = torch.tensor([[1.0], [2.0]]), torch.tensor([[3.0], [4.0], [5.0]])
    gt = paired_scores(images, captions, np.array([0, 1, 1], dtype=dtype), DotProductScorer())
    assert gt.tolist() == [3.0, 8.0, 10.0]


def test_embeddings_are_scored_as_float32_on_the_cpu():
    scorer = Recording()
    retrieval_ranks(np.ones((3, 2)), np.ones((4, 2)), C2I, scorer=scorer)  # float64 arrays in
    assert {c[2:] for c in scorer.calls} == {(torch.float32, torch.float32, "cpu")}


def test_embeddings_on_another_device_are_copied_to_the_cpu():
    """Without a GPU, a meta tensor stands in for one: ``as_embeddings`` must copy it to the CPU,
    and PyTorch refuses to copy a meta tensor out, so the refusal proves the copy is attempted (an
    embedding left on its device would come back as a meta tensor instead)."""
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        as_embeddings(torch.ones(2, 3, device="meta"), "images")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_embeddings_on_a_gpu_are_read_to_the_cpu():
    t = as_embeddings(torch.ones(2, 3, dtype=torch.float64, device="cuda"), "images")
    assert (t.device.type, t.dtype, t.tolist()) == ("cpu", torch.float32, [[1.0] * 3] * 2)


class MetaScorer(torch.nn.Module):
    """A scorer whose parameter lives on the meta device (a stand-in for a GPU): it records the
    device of its inputs and returns CPU zeros."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1, device="meta"))
        self.devices = []

    def pairwise(self, images, captions):
        self.devices += [images.device.type, captions.device.type]
        return torch.zeros(images.shape[0], captions.shape[0])

    def paired(self, images, captions):
        self.devices += [images.device.type, captions.device.type]
        return torch.zeros(images.shape[0])


class NotAModule:
    parameters = ()  # an attribute, not nn.Module's method


@pytest.mark.parametrize("scorer, device", [
    (MetaScorer(), "meta"), (DotProductScorer(), "cpu"), (NegativeSquaredDistance(), "cpu"), (NotAModule(), "cpu"),
])
def test_a_scorer_computes_on_the_device_of_its_first_parameter(scorer, device):
    assert scorer_device(scorer) == torch.device(device)


def test_embeddings_go_to_the_scorers_device():
    scorer = MetaScorer()
    images, captions = torch.ones(3, 2), torch.ones(4, 2)
    blocks = list(score_blocks(images, captions, scorer, chunk_size=2))
    gt = paired_scores(images, captions, C2I, scorer)
    assert scorer.devices == ["meta"] * 6  # 2 pairwise blocks, 1 paired block, 2 inputs each
    assert [(first, b.tolist()) for first, b in blocks] == [(0, [[0.0] * 4] * 2), (2, [[0.0] * 4])]
    assert gt.tolist() == [0.0] * 4


class Cast(DotProductScorer):
    """The dot product, returned as ``dtype`` (a torch dtype, or a numpy dtype for a numpy array)."""

    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def _out(self, scores):
        return scores.to(self.dtype) if isinstance(self.dtype, torch.dtype) else scores.numpy().astype(self.dtype)

    def pairwise(self, images, captions):
        return self._out(super().pairwise(images, captions))

    def paired(self, images, captions):
        return self._out(super().paired(images, captions))


# images [[1, 0], [0, 2]], captions [[1, 1], [0, 1], [2, 0]] of images [0, 1, 0]
EMB_IMAGES, EMB_CAPTIONS, EMB_C2I = torch.tensor([[1.0, 0], [0, 2]]), torch.tensor([[1.0, 1], [0, 1], [2, 0]]), \
    np.array([0, 1, 0])


@pytest.mark.parametrize("dtype, block_dtype, gt_dtype", [
    (torch.float32, np.float32, np.float32),
    (torch.float64, np.float64, np.float64),  # the ground truth widens to hold float64 scores exactly
    (torch.float16, np.float16, np.float32),  # ... but never narrows below float32
    (torch.int64, np.float64, np.float64),    # integer scores count as float64
    (np.float32, np.float32, np.float32),     # a scorer may return numpy arrays
    (np.int32, np.float64, np.float64),
])
def test_score_dtypes_follow_the_scorer_and_are_floating(dtype, block_dtype, gt_dtype):
    scorer = Cast(dtype)
    blocks = list(score_blocks(EMB_IMAGES, EMB_CAPTIONS, scorer, chunk_size=1))
    assert [(first, b.dtype, b.tolist()) for first, b in blocks] == \
        [(0, block_dtype, [[1.0, 0.0, 2.0]]), (1, block_dtype, [[2.0, 2.0, 0.0]])]
    gt = paired_scores(EMB_IMAGES, EMB_CAPTIONS, EMB_C2I, scorer)
    assert gt.dtype == gt_dtype and gt.tolist() == [1.0, 2.0, 2.0]


def test_float64_ground_truth_scores_are_not_rounded():
    # 1/3 has no exact float32: a float32 result would hold 0.3333333432674408
    images, captions = torch.ones(1, 1, dtype=torch.float64), torch.full((1, 1), 1 / 3, dtype=torch.float64)
    assert paired_scores(images, captions, np.array([0]), DotProductScorer()).tolist() == [1 / 3]


class TracksGradients(DotProductScorer):
    """Scores with a learnable scale and autograd switched back on inside (as a model that always
    tracks gradients would): its scores require grad even when the caller disabled it."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(()))

    def pairwise(self, images, captions):
        with torch.enable_grad():
            return super().pairwise(images, captions) * self.scale

    def paired(self, images, captions):
        with torch.enable_grad():
            return super().paired(images, captions) * self.scale


def test_scores_that_require_grad_are_detached():
    ranks = retrieval_ranks(EMB_IMAGES, EMB_CAPTIONS, EMB_C2I, scorer=TracksGradients())
    assert [r.tolist() for r in ranks] == [r.tolist() for r in retrieval_ranks(EMB_IMAGES, EMB_CAPTIONS, EMB_C2I)]


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_the_counter_takes_integer_score_blocks():
    """Integer scores (e.g. counts of shared words) rank exactly like their float values."""
    scores = np.rint(SIM * 100).astype(np.int64)
    counter = RankCounter(C2I, 3, scores[C2I, np.arange(4)])
    counter.add(0, scores[:2])
    counter.add(2, scores[2:])
    i2t, t2i = counter.ranks()
    assert i2t.tolist() == I2T and t2i.tolist() == T2I
