"""The retrieval losses against hand computations on tiny batches.

Images are the unit vectors e_0, e_1, ... so that the score of image i with caption c is simply
captions[c][i]: each test writes the score matrix S [I, C] it wants as ``captions = S.T``.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from phrasedet.modeling.losses import (LogisticPairLoss, RankingLoss, embedding_scores, mean_topk, neighbourhood_hinges,
                                       reduce_hinges)
from phrasedet.modeling.losses import ranking as ranking_module
from phrasedet.modeling.losses.logistic import sample_negative_captions
from phrasedet.modeling.scorers import DotProductScorer

# rows: images, columns: captions; caption c belongs to image c
S = torch.tensor([[0.90, 0.30, 0.55],
                  [0.20, 0.80, 0.75],
                  [0.10, 0.65, 0.70]])
# image-anchored hinges [0.2 + S[c, c'] - S[c, c]]_+: row 0 none; row 1: 0.15 (c' = 2); row 2: 0.15 (c' = 1)
# caption-anchored [0.2 + S[i', c] - S[c, c]]_+: column 0 none; column 1: 0.05 (i' = 2);
# column 2: 0.05 (i' = 0) and 0.25 (i' = 1)


def _loss(scores, owner, keys, **kw):
    images = torch.eye(scores.shape[0])
    captions = scores.t().clone()
    kw.setdefault("gather", False)
    return RankingLoss(**kw)(images, captions, torch.as_tensor(owner), torch.as_tensor(keys))


def test_sum_of_hinges_vse0_by_hand():
    out = _loss(S, [0, 1, 2], [10, 11, 12], negatives="all", margin=0.2)
    assert out["loss_image_anchored"].item() == pytest.approx(0.15 + 0.15)
    assert out["loss_caption_anchored"].item() == pytest.approx(0.05 + 0.05 + 0.25)
    assert set(out) == {"loss_image_anchored", "loss_caption_anchored"}


def test_max_of_hinges_vsepp_keeps_only_the_hardest_negative():
    out = _loss(S, [0, 1, 2], [10, 11, 12], negatives="hardest", margin=0.2)
    assert out["loss_image_anchored"].item() == pytest.approx(0.30)
    assert out["loss_caption_anchored"].item() == pytest.approx(0.05 + 0.25)  # column 2 keeps 0.25, not 0.30


def test_topk_sums_the_k_largest_and_mean_divides_by_the_rows():
    out = _loss(S, [0, 1, 2], [10, 11, 12], negatives="topk", topk=1, margin=0.2)
    assert out["loss_caption_anchored"].item() == pytest.approx(0.30)  # K = 1 is the max
    out = _loss(S, [0, 1, 2], [10, 11, 12], negatives="topk", topk=2, margin=0.2, reduction="mean")
    assert out["loss_caption_anchored"].item() == pytest.approx((0.05 + 0.30) / 3)


def test_term_weights_scale_and_zero_weight_drops_the_term():
    out = _loss(S, [0, 1, 2], [10, 11, 12], negatives="all", image_weight=0.0, caption_weight=1.5)
    assert set(out) == {"loss_caption_anchored"}
    assert out["loss_caption_anchored"].item() == pytest.approx(1.5 * 0.35)


# Rows 0 and 1 are the same dataset image (key 7) loaded twice; caption 1 belongs to row 1.
S_DUP = torch.tensor([[0.90, 0.85, 0.10],
                      [0.80, 0.95, 0.20],
                      [0.10, 0.20, 0.90]])


def test_a_caption_of_the_same_image_is_never_a_negative_when_masked():
    masked = _loss(S_DUP, [0, 1, 2], [7, 7, 8], negatives="all", margin=0.2)
    assert masked["loss_image_anchored"].item() == pytest.approx(0.0)
    assert masked["loss_caption_anchored"].item() == pytest.approx(0.0)
    # the released VSE++ code: the other copy's caption is a negative
    # image-anchored row 0: 0.2 + 0.85 - 0.90 = 0.15; row 1: 0.2 + 0.80 - 0.95 = 0.05
    # caption-anchored column 0: 0.2 + 0.80 - 0.90 = 0.10; column 1: 0.2 + 0.85 - 0.95 = 0.10
    code = _loss(S_DUP, [0, 1, 2], [7, 7, 8], negatives="all", margin=0.2, mask_same_image=False)
    assert code["loss_image_anchored"].item() == pytest.approx(0.20)
    assert code["loss_caption_anchored"].item() == pytest.approx(0.20)


def test_two_captions_of_one_image_in_one_row():
    # image 0 owns captions 0 and 1; image 1 owns caption 2
    scores = torch.tensor([[0.9, 0.5, 0.65],
                           [0.3, 0.55, 0.8]])
    out = _loss(scores, [0, 0, 1], [1, 2], negatives="all", margin=0.2)
    # image-anchored: (0, c0): c2 -> 0.2 + 0.65 - 0.9 < 0; (0, c1): c2 -> 0.2 + 0.65 - 0.5 = 0.35 (c0 is its own
    # image's, never a negative); (1, c2): c0 -> 0.2 + 0.3 - 0.8 < 0, c1 -> 0.2 + 0.55 - 0.8 < 0
    assert out["loss_image_anchored"].item() == pytest.approx(0.35)
    # caption-anchored: c0: image 1 -> 0.2 + 0.3 - 0.9 < 0; c1: 0.2 + 0.55 - 0.5 = 0.25; c2: image 0 -> 0.2 + 0.65 - 0.8 = 0.05
    assert out["loss_caption_anchored"].item() == pytest.approx(0.30)


def test_euclidean_scores_are_minus_paper_000_code_distance():
    a = F.normalize(torch.tensor([[1.0, 0.0], [0.6, 0.8]]), dim=1)
    b = F.normalize(torch.tensor([[0.0, 1.0]]), dim=1)
    got = embedding_scores(a, b, "euclidean")
    cos = torch.tensor([[0.0], [0.8]])
    assert torch.allclose(got, -(2 - 2 * cos + 1e-4).sqrt())
    assert torch.allclose(embedding_scores(a, b, "cosine"), cos)
    assert torch.allclose(embedding_scores(a, b), cos)  # cosine is the default
    with pytest.raises(ValueError) as e:
        embedding_scores(a, b, "manhattan")
    assert str(e.value) == "distance must be one of ('cosine', 'euclidean'), got 'manhattan'"


def test_neighbourhood_uses_the_farthest_caption_of_the_same_image():
    # captions 0, 1, 2 of image A; caption 3 of image B
    scores = torch.tensor([[1.0, 0.7, 0.4, 0.5],
                           [0.7, 1.0, 0.9, 0.2],
                           [0.4, 0.9, 1.0, 0.3],
                           [0.5, 0.2, 0.3, 1.0]])
    same = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0], [0, 0, 0, 1]], dtype=torch.bool)
    hinges = neighbourhood_hinges(scores, same, margin=0.05)
    # caption 3 has no neighbour: 3 anchor rows. Anchor 0: farthest neighbour 0.4; caption 3: 0.05 + 0.5 - 0.4
    assert hinges.shape == (3, 4)
    assert hinges[0].tolist() == pytest.approx([0, 0, 0, 0.15])
    assert hinges[1].tolist() == pytest.approx([0, 0, 0, 0])  # 0.05 + 0.2 - 0.7 < 0
    assert hinges[2].tolist() == pytest.approx([0, 0, 0, 0])  # 0.05 + 0.3 - 0.4 < 0 (exactly -0.05)


def test_neighbourhood_term_in_the_loss():
    images = torch.eye(2)  # captions 0 and 1 belong to image 0, caption 2 to image 1
    captions = F.normalize(torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8]]), dim=1)
    loss = RankingLoss(margin=0.05, negatives="all", image_weight=0.0, caption_weight=0.0,
                       neighbourhood_weight=2.0, gather=False)
    out = loss(images, captions, torch.tensor([0, 0, 1]), torch.tensor([5, 6]))
    # caption-caption cosines: c0.c1 = 0.8, c0.c2 = 0.6, c1.c2 = 0.96; anchors c0 and c1 (c2 has no neighbour)
    # c0: 0.05 + 0.6 - 0.8 < 0; c1: 0.05 + 0.96 - 0.8 = 0.21
    assert out["loss_neighbourhood"].item() == pytest.approx(2.0 * 0.21, abs=1e-6)


def test_reduce_hinges_modes_row_by_row():
    h = torch.tensor([[0.0, 0.3, 0.1, 0.2],
                      [0.4, 0.0, 0.0, 0.05]])
    assert reduce_hinges(h, "all").tolist() == pytest.approx([0.6, 0.45])
    assert reduce_hinges(h, "hardest").tolist() == pytest.approx([0.3, 0.4])
    assert reduce_hinges(h, "topk").tolist() == pytest.approx([0.3, 0.4])  # K = 1 by default
    assert reduce_hinges(h, "topk", 2).tolist() == pytest.approx([0.5, 0.45])
    assert reduce_hinges(h, "topk", 10).tolist() == pytest.approx([0.6, 0.45])
    assert reduce_hinges(h[:, :0], "hardest").tolist() == [0.0, 0.0]
    with pytest.raises(ValueError) as e:
        reduce_hinges(h, "softmax")
    assert str(e.value) == "negatives must be one of ('all', 'hardest', 'topk'), got 'softmax'"


@pytest.mark.parametrize("kw, message", [
    ({"negatives": "semi-hard"}, "negatives must be one of ('all', 'hardest', 'topk'), got 'semi-hard'"),
    ({"distance": "manhattan"}, "distance must be one of ('cosine', 'euclidean'), got 'manhattan'"),
    ({"reduction": "max"}, "reduction must be one of ('sum', 'mean'), got 'max'"),
    ({"topk": 0}, "topk must be >= 1, got 0"),
])
def test_ranking_loss_refuses_bad_settings_naming_them(kw, message):
    with pytest.raises(ValueError) as e:
        RankingLoss(**kw)
    assert str(e.value) == message


def test_defaults_are_vsepp_hardest_negative_summed_with_margin_0_2_over_the_gathered_batch(monkeypatch):
    calls = []

    def recording_gather(*batch):
        calls.append(batch)
        return batch

    monkeypatch.setattr(ranking_module, "gather_batch", recording_gather)
    out = RankingLoss()(torch.eye(3), S.t().clone(), torch.arange(3), torch.tensor([10, 11, 12]))
    assert len(calls) == 1  # gather=True by default
    # as in test_max_of_hinges_vsepp_keeps_only_the_hardest_negative
    assert {k: v.item() for k, v in out.items()} == pytest.approx({"loss_image_anchored": 0.30,
                                                                   "loss_caption_anchored": 0.30})


def _d(squared):
    """Paper 000's code distance: sqrt(squared distance + 1e-4)."""
    return math.sqrt(squared + 1e-4)


def test_euclidean_ranking_loss_by_hand():
    # images at (0, 0), (4, 0); caption 0 at (0, 1) (image 0), caption 1 at (3, 0) (image 1); scores are -distances
    images, captions = torch.tensor([[0.0, 0.0], [4.0, 0.0]]), torch.tensor([[0.0, 1.0], [3.0, 0.0]])
    out = RankingLoss(margin=3.0, negatives="all", distance="euclidean", gather=False)(
        images, captions, torch.tensor([0, 1]), torch.tensor([1, 2]))
    # image-anchored: image 0 with c1 against c0: 3 - d(i0, c1) + d(i0, c0) = 3 - 3 + 1; image 1: 3 - sqrt(17) + 1 < 0
    assert out["loss_image_anchored"].item() == pytest.approx(3 - _d(9) + _d(1), abs=1e-6)
    # caption-anchored: c0 with image 1: 3 - sqrt(17) + 1 < 0; c1 with image 0: 3 - d(i0, c1) + d(i1, c1) = 3 - 3 + 1
    assert out["loss_caption_anchored"].item() == pytest.approx(3 - _d(9) + _d(1), abs=1e-6)


def test_euclidean_neighbourhood_term_by_hand():
    # captions 0 and 1 of one dataset image at (0, 0) and (0, 2); caption 2 of another at (0, 1)
    captions = torch.tensor([[0.0, 0.0], [0.0, 2.0], [0.0, 1.0]])
    loss = RankingLoss(margin=0.05, negatives="all", distance="euclidean", image_weight=0.0, caption_weight=0.0,
                       neighbourhood_weight=1.0, gather=False)
    out = loss(torch.zeros(2, 2), captions, torch.tensor([0, 0, 1]), torch.tensor([5, 6]))
    # anchors c0 and c1: positive at distance 2 (each other), negative c2 at distance 1: 0.05 - d(1) + d(2) each
    assert out["loss_neighbourhood"].item() == pytest.approx(2 * (0.05 - _d(1) + _d(4)), abs=1e-6)


def test_mean_over_no_rows_is_zero_not_nan():
    """No caption has another caption of its image: the neighbourhood term has no row and costs 0."""
    loss = RankingLoss(image_weight=0.0, caption_weight=0.0, neighbourhood_weight=1.0, reduction="mean", gather=False)
    out = loss(torch.eye(3), S.t().clone(), torch.arange(3), torch.tensor([10, 11, 12]))
    assert out["loss_neighbourhood"].item() == 0.0


@pytest.mark.parametrize("mask_same_image", [True, False])
def test_the_loss_creates_its_tensors_on_the_inputs_device(mask_same_image):
    """Index and mask tensors follow the inputs' device, not the default one (on a GPU, mixing devices is an
    error): with the default device set to "meta", CPU inputs still give the hand values of
    test_sum_of_hinges_vse0_by_hand."""
    images, captions, owner, keys = torch.eye(3), S.t().clone(), torch.arange(3), torch.tensor([10, 11, 12])
    loss = RankingLoss(negatives="all", neighbourhood_weight=1.0, mask_same_image=mask_same_image, gather=False)
    with torch.device("meta"):
        out = loss(images, captions, owner, keys)
    assert {k: (v.device.type, v.item()) for k, v in out.items()} == {
        "loss_image_anchored": ("cpu", pytest.approx(0.30)), "loss_caption_anchored": ("cpu", pytest.approx(0.35)),
        "loss_neighbourhood": ("cpu", 0.0)}


def test_neighbourhood_hinges_mask_lives_on_the_scores_device():
    scores = torch.tensor([[1.0, 0.2, 0.5], [0.2, 1.0, 0.4], [0.5, 0.4, 1.0]])
    same = torch.tensor([[1, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=torch.bool)
    with torch.device("meta"):
        hinges = neighbourhood_hinges(scores, same, margin=0.1)
    # anchors 0 and 1 (each other's neighbour, score 0.2); negative caption 2: 0.1 + 0.5 - 0.2, 0.1 + 0.4 - 0.2
    assert hinges.shape == (2, 3)
    assert hinges.flatten().tolist() == pytest.approx([0, 0, 0.4, 0, 0, 0.3])


def test_mean_topk():
    assert mean_topk(torch.tensor([1.0, 4.0, 2.0, 3.0]), 2).item() == pytest.approx(3.5)
    assert mean_topk(torch.tensor([1.0, 4.0]), 5).item() == pytest.approx(2.5)


def test_gradient_flows_only_through_hinges_that_are_violated():
    images = torch.eye(3, requires_grad=True)
    captions = S.t().clone().requires_grad_(True)
    out = RankingLoss(negatives="hardest", gather=False)(images, captions, torch.arange(3), torch.arange(3))
    sum(out.values()).backward()
    # caption 0 is in no violated hinge, as a positive or a negative
    assert captions.grad[0].abs().sum().item() == 0.0
    assert captions.grad[2].abs().sum().item() > 0.0


@pytest.mark.parametrize("reduction, pairs", [(None, 4), ("mean", 4), ("sum", 1)])
def test_logistic_pair_loss_by_hand(reduction, pairs):
    """The mean over the pairs by default, or their sum."""
    images = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    captions = torch.tensor([[0.8, 0.6], [0.6, 0.8]])
    owner, keys = torch.tensor([0, 1]), torch.tensor([3, 4])
    # each caption's only other-image caption is the other one, so the negatives are fixed
    anchors, negs = sample_negative_captions(owner, keys)
    assert anchors.tolist() == [0, 1] and negs.tolist() == [1, 0]
    loss = LogisticPairLoss() if reduction is None else LogisticPairLoss(reduction)
    out = loss(DotProductScorer(), images, captions, owner, keys)
    sp = lambda x: math.log1p(math.exp(x))  # noqa: E731
    total = sp(-0.8) + sp(-0.8) + sp(0.6) + sp(0.6)  # positives (0,c0), (1,c1); negatives (0,c1), (1,c0)
    assert out["loss_pair_logistic"].item() == pytest.approx(total / pairs, rel=1e-6)


def test_logistic_pair_loss_refuses_another_reduction():
    with pytest.raises(ValueError) as e:
        LogisticPairLoss("max")
    assert str(e.value) == "reduction must be 'sum' or 'mean', got 'max'"


@pytest.mark.parametrize("owner", [[], [0, 0, 1]], ids=["no caption", "one dataset image"])
def test_no_negative_without_a_caption_of_another_image(owner):
    """Rows 0 and 1 are the same dataset image (key 4): no caption has a caption of another image."""
    anchors, negatives = sample_negative_captions(torch.tensor(owner, dtype=torch.long), torch.tensor([4, 4]))
    assert anchors.tolist() == [] and negatives.tolist() == []


def test_negatives_are_drawn_from_the_given_generator_leaving_the_global_one_alone():
    owner, keys = torch.arange(6), torch.arange(6)  # six captions of six images: 5 candidates each
    draws = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        state = torch.get_rng_state()
        draws.append(sample_negative_captions(owner, keys, generator=torch.Generator().manual_seed(0))[1].tolist())
        assert torch.equal(torch.get_rng_state(), state)
    assert draws[0] == draws[1]


def test_logistic_negatives_never_come_from_the_same_image():
    torch.manual_seed(0)
    owner = torch.tensor([0, 0, 1, 1, 2])
    keys = torch.tensor([1, 1, 2])  # rows 0 and 1 are the same dataset image
    for _ in range(20):
        anchors, negs = sample_negative_captions(owner, keys)
        assert anchors.tolist() == [0, 1, 2, 3, 4]
        assert all(keys[owner[a]] != keys[owner[n]] for a, n in zip(anchors, negs))
