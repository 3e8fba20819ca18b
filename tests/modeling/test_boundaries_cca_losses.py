"""Boundary values of the CCA fits and the training losses, on hand cases (issue 14): the CCA ridge
(a rank-deficient covariance whose answer depends on where and how much ridge is added), the
normalized-CCA power, the stage-2 pairs (IoU exactly 0.6, the per-image cap), Deep CCA's ridge and
top-k, the hinge at exactly zero violation, top-K at the number of negatives, and the IoU
thresholds of the Embedding Network and CITE losses.

Every expected value is computed by hand in the comments; the mutation each case kills is named.
"""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from detectron2.structures import Boxes, ImageList, Instances

from phrasedet.modeling.cca import PhraseGroupedMoments, fit_cca, fit_cca_paired
from phrasedet.modeling.cca.fitting import collect_positive_pairs, fit_cca_from_detector, fit_stacked_cca
from phrasedet.modeling.classifiers import CITEClassifier, EmbeddingNetClassifier, PhraseTargets
from phrasedet.modeling.cca.deep import cca_correlation_loss
from phrasedet.modeling.losses import RankingLoss, ranking_hinges, reduce_hinges
from tests.modeling.test_retrieval_losses import _loss
from tests.modeling.cca_reference import numpy_regularized_cca


def _below(value):
    """The float32 just below ``value``."""
    return torch.nextafter(torch.tensor(value), torch.tensor(0.0)).item()


# ---------------------------------------------------------------- CCA: the ridge and the power
# Three pairs: x1 = (-1, 0, 1), y = (-1, 1, 0) (both of mean 0). Covariances / (n - 1) = / 2:
# var x1 = 2 / 2 = 1, var y = 2 / 2 = 1, cov(x1, y) = ((-1)(-1) + 0 + 0) / 2 = 0.5.
X1 = np.array([-1.0, 0.0, 1.0])
Y = np.array([[-1.0], [1.0], [0.0]])


def test_one_dimensional_cca_correlation_is_shrunk_by_the_ridge_on_both_variances():
    # rho = cov / sqrt((var x + r)(var y + r)) = 0.5 / (1 + r): r = 1 -> 0.25 (no ridge: 0.5; ridge on
    # one side only: 0.5 / sqrt(2) = 0.354; ridge on the sums before / (n - 1): 0.5 / (1 + 0.5) = 1/3).
    # A = 1 / sqrt(var x + r) = 1 / sqrt(2) up to sign, B likewise, with A B > 0 (positive correlation).
    # power 2: scale = 0.25^2 = 0.0625; project_regions(1) = 1 * A * 0.0625.
    cca = fit_cca_paired(X1[:, None], Y, ridge=1.0, power=2.0)
    np.testing.assert_allclose(cca.correlations, [0.25], rtol=1e-12)
    np.testing.assert_allclose(np.abs(cca.A), [[1 / math.sqrt(2)]], rtol=1e-12)
    np.testing.assert_allclose(np.abs(cca.B), [[1 / math.sqrt(2)]], rtol=1e-12)
    assert cca.A[0, 0] * cca.B[0, 0] > 0
    np.testing.assert_allclose(cca.scale, [0.0625], rtol=1e-12)
    np.testing.assert_allclose(cca.project_regions([[1.0]]), [[cca.A[0, 0] * 0.0625]], rtol=1e-12)
    np.testing.assert_allclose(cca.project_phrases([[1.0]]), [[cca.B[0, 0] * 0.0625]], rtol=1e-12)
    # r = 0.5: 0.5 / 1.5 = 1/3; power 0: no scaling at all
    half = fit_cca_paired(X1[:, None], Y, ridge=0.5, power=0.0)
    np.testing.assert_allclose(half.correlations, [1 / 3], rtol=1e-12)
    np.testing.assert_allclose(half.scale, [1.0], rtol=1e-12)


def test_the_default_ridge_and_power_are_the_released_codes():
    # ridge 1e-4, power 1: rho = 0.5 / (1 + 1e-4) and scale = rho (ridge 1.0001 would give 0.2500;
    # power 2 a scale of rho^2 = 0.2499)
    rho = 0.5 / 1.0001
    moments = PhraseGroupedMoments(1, 3)
    moments.add(X1[:, None], np.arange(3))
    for cca in (fit_cca(moments, Y), fit_cca_paired(X1[:, None], Y)):
        np.testing.assert_allclose(cca.correlations, [rho], rtol=1e-12)
        np.testing.assert_allclose(cca.scale, [rho], rtol=1e-12)


def _rank_deficient_expected(r):
    """x = (x1, x1): S11 = [[1, 1], [1, 1]] (rank 1), S12 = (0.5, 0.5)^T, S22 = 1.

    (1, 1) / sqrt(2) is an eigenvector of S11 + r I with eigenvalue 2 + r, so
    (S11 + r I)^-1 S12 = 0.5 / (2 + r) (1, 1) and S12^T (S11 + r I)^-1 S12 = 0.5 / (2 + r);
    rho^2 = that / (S22 + r) = 0.5 / ((2 + r)(1 + r)). A is along (1, 1) with A^T (S11 + r I) A = 1:
    A = (1, 1) / sqrt(2 (2 + r)). (A separate numpy computation of the same, below, cross-checks.)
    """
    rho = math.sqrt(0.5 / ((2 + r) * (1 + r)))
    a = 1 / math.sqrt(2 * (2 + r))
    return rho, np.array([a, a])


@pytest.mark.parametrize("ridge", [1.0, 0.5])
def test_rank_deficient_cca_depends_on_the_ridge_by_hand(ridge):
    x = np.column_stack([X1, X1])  # two identical columns: S11 is singular without the ridge
    rho, a = _rank_deficient_expected(ridge)  # r = 1: rho = sqrt(1/12) = 0.2887, A = (1, 1) / sqrt(6)
    cca = fit_cca_paired(x, Y, ridge=ridge, power=2.0)
    np.testing.assert_allclose(cca.correlations, [rho], rtol=1e-10)
    np.testing.assert_allclose(np.abs(cca.A[:, 0]), a, rtol=1e-10)
    np.testing.assert_allclose(np.abs(cca.B), [[1 / math.sqrt(1 + ridge)]], rtol=1e-10)
    np.testing.assert_allclose(cca.scale, [rho ** 2], rtol=1e-10)  # r = 1: exactly 1/12
    # the fitted A whitens the regularized covariance: A^T (S11 + r I) A = 1
    s11 = np.cov(x.T) + ridge * np.eye(2)
    np.testing.assert_allclose(cca.A.T @ s11 @ cca.A, [[1.0]], rtol=1e-10)
    d, a_ref = numpy_regularized_cca(x, Y, ridge)
    np.testing.assert_allclose(cca.correlations, d[:1], rtol=1e-10)
    np.testing.assert_allclose(np.abs(cca.A[:, 0]), np.abs(a_ref[:, 0]), rtol=1e-10)


def test_without_ridge_the_singular_case_gives_the_unregularized_correlation():
    # r = 0: rho^2 = 0.5 / (2 * 1) -> rho = 0.5 (through the clamped S^-1/2: S12 has no component
    # along S11's null direction (1, -1)). So the r = 1 answer 0.2887 above is the ridge's doing.
    cca = fit_cca_paired(np.column_stack([X1, X1]), Y, ridge=0.0)
    np.testing.assert_allclose(cca.correlations, [0.5], rtol=1e-6)


def test_stacked_fit_and_the_recipe_pass_the_configured_ridge_and_power():
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    x = np.column_stack([X1, X1])
    batches = lambda: iter([(x, np.arange(3))])  # noqa: E731
    rho, _ = _rank_deficient_expected(1.0)
    (layer,) = fit_stacked_cca(batches, Y, dims=(1,), ridge=1.0, power=2.0)
    np.testing.assert_allclose(layer.correlations, [rho], rtol=1e-10)
    np.testing.assert_allclose(layer.scale, [1 / 12], rtol=1e-10)
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    # the documented defaults (DECISIONS.md, PHRASE_DETECTION.md stage 2): IoU >= 0.6, <= 10 per image, ridge 1e-4, power 1
    c = cfg.PHRASEDET.CCA
    assert (c.PAIR_IOU, c.MAX_PAIRS_PER_IMAGE, c.RIDGE, c.POWER) == (0.6, 10, 1e-4, 1.0)
    cfg.PHRASEDET.CCA.RIDGE, cfg.PHRASEDET.CCA.POWER, cfg.PHRASEDET.CCA.DIMS = 1.0, 2.0, [0]
    model = SimpleNamespace(roi_heads=SimpleNamespace(region_features=SimpleNamespace(output_dim=2)))
    (layer,) = fit_cca_from_detector(cfg, model, pairs=(batches, Y))
    np.testing.assert_allclose(layer.correlations, [rho], rtol=1e-10)  # RIDGE reached the fit
    np.testing.assert_allclose(layer.scale, [1 / 12], rtol=1e-10)  # POWER too (power 1 would give 0.2887)


# ---------------------------------------------------------------- CCA: the stage-2 pairs
class _Regions:
    """Region features = the proposal boxes themselves, so a pair shows which proposal it took."""

    def __call__(self, features, boxes, image_sizes):
        return torch.cat([b.tensor for b in boxes])


class _StubDetector:
    """Just what :func:`collect_positive_pairs` calls, with fixed proposals per image."""

    device = torch.device("cpu")

    def __init__(self, proposals):
        self.proposals = proposals
        self.roi_heads = SimpleNamespace(region_features=_Regions())

    def eval(self):
        return self

    def preprocess_image(self, inputs):
        return ImageList(torch.zeros(len(inputs), 3, 64, 128), [(64, 128)] * len(inputs))

    def backbone(self, tensor):
        return {}

    def proposal_generator(self, images, features, gt):
        out = []
        for boxes in self.proposals:
            p = Instances((64, 128))
            p.proposal_boxes = Boxes(torch.tensor(boxes))
            out.append(p)
        return out, {}


def _input(gt_boxes, phrases):
    inst = Instances((64, 128))
    inst.gt_boxes = Boxes(torch.tensor(gt_boxes))
    inst.gt_phrase_ids = torch.arange(len(gt_boxes))
    return {"instances": inst, "phrases": phrases}


def test_a_pair_at_iou_exactly_0_6_is_kept_and_just_below_is_not():
    # gt a [0, 0, 10, 10]: best proposal [0, 0, 6, 10], IoU 60 / 100 = 0.6 (float32 0.6 >= 0.6) -> a pair;
    # its other proposal [0, 0, 5, 10] (IoU 0.5) is not the best. gt b [20, 0, 30, 10]: best proposal
    # [20, 0, 25.96875, 10], IoU 59.6875 / 100 < 0.6 -> no pair. (> instead of >=: no pair at all.)
    model = _StubDetector([[[0.0, 0, 5, 10], [0.0, 0, 6, 10], [20.0, 0, 25.96875, 10]]])
    inputs = [_input([[0.0, 0, 10, 10], [20.0, 0, 30, 10]], ["a", "b"])]
    (regions, ids), = list(collect_positive_pairs(model, [inputs], {"a": 4, "b": 9}))  # defaults: 0.6, 10
    assert ids.tolist() == [4]
    assert regions.tolist() == [[0.0, 0.0, 6.0, 10.0]]


def test_pairs_are_capped_per_image_keeping_the_best_ious():
    # image 0: gt k at [20k, 0, 20k + 10, 10]; its best proposal [20k, 0, 20k + 10 q_k, 10] has IoU q_k =
    # 1, 0.8, 0.7, 0.6 (all >= 0.6); gt 0 also has a worse proposal (IoU 0.9). Cap 3 keeps q = 1, 0.8, 0.7
    # (highest first), cap 4 all four (the last exactly at 0.6), cap 2 the first two.
    # image 1: one gt, IoU 1 -> the cap counts per image, not per batch.
    q = [1.0, 0.8, 0.7, 0.6]
    gts = [[20.0 * k, 0, 20.0 * k + 10, 10] for k in range(4)]
    props = [[20.0 * k, 0, 20.0 * k + 10 * qk, 10] for k, qk in enumerate(q)] + [[0.0, 0, 9, 10]]
    model = _StubDetector([props, [[0.0, 0, 10, 10]]])
    inputs = [_input(gts, ["p0", "p1", "p2", "p3"]), _input([[0.0, 0, 10, 10]], ["p4"])]
    index = {"p0": 7, "p1": 5, "p2": 3, "p3": 1, "p4": 0}
    for cap, expected in ((2, [7, 5]), (3, [7, 5, 3]), (4, [7, 5, 3, 1]), (10, [7, 5, 3, 1])):
        (regions, ids), = list(collect_positive_pairs(model, [inputs], index, 0.6, cap))
        assert ids.tolist() == expected + [0]
        assert regions[: len(expected)].tolist() == [props[k] for k in range(len(expected))]  # the best, not the 0.9 one


# ---------------------------------------------------------------- Deep CCA's loss
# Centered, orthogonal u1 = (1, 1, -1, -1), u2 = (1, -1, 1, -1), u3 = (1, -1, -1, 1), |u|^2 = 4.
# Views x = (u1, u2), y = (u1 + u3, u2): S11 = diag(4/3, 4/3), S22 = diag(8/3, 4/3), S12 = diag(4/3, 4/3)
# (u1 . u2 = u2 . (u1 + u3) = 0): two independent canonical pairs.
# With ridge r = 2/3: rho_2 = (4/3) / (4/3 + 2/3) = 2/3; rho_1 = (4/3) / sqrt((4/3 + 2/3)(8/3 + 2/3)) = (4/3) / sqrt(20/3).
U1, U2, U3 = np.array([1.0, 1, -1, -1]), np.array([1.0, -1, 1, -1]), np.array([1.0, -1, -1, 1])


def test_deep_cca_loss_top_k_by_hand():
    x = torch.tensor(np.column_stack([U1, U2]))
    y = torch.tensor(np.column_stack([U1 + U3, U2]))
    r1, r2 = 2 / 3, (4 / 3) / math.sqrt(20 / 3)  # 0.6667 > 0.5164
    assert cca_correlation_loss(x, y, ridge=2 / 3).item() == pytest.approx(-(r1 + r2), rel=1e-10)
    assert cca_correlation_loss(x, y, ridge=2 / 3, k=1).item() == pytest.approx(-r1, rel=1e-10)  # the largest
    assert cca_correlation_loss(x, y, ridge=2 / 3, k=2).item() == pytest.approx(-(r1 + r2), rel=1e-10)
    assert cca_correlation_loss(x, y, ridge=2 / 3, k=3).item() == pytest.approx(-(r1 + r2), rel=1e-10)  # k > #: all
    # without the ridge: rho = 1 (x2 = y2) and 1 / sqrt(2)
    assert cca_correlation_loss(x, y, ridge=0.0).item() == pytest.approx(-(1 + 1 / math.sqrt(2)), rel=1e-6)


def test_deep_cca_loss_and_linear_cca_agree_on_the_rank_deficient_ridge_case():
    # the same hand case as the linear CCA above: ridge 1 -> rho = sqrt(0.5 / (3 * 2)) = sqrt(1/12)
    x = torch.tensor(np.column_stack([X1, X1]))
    rho, _ = _rank_deficient_expected(1.0)
    assert cca_correlation_loss(x, torch.tensor(Y), ridge=1.0).item() == pytest.approx(-rho, rel=1e-10)
    with pytest.raises(ValueError, match="not positive definite"):
        cca_correlation_loss(x, torch.tensor(Y), ridge=0.0)  # singular S11 without the ridge


# ---------------------------------------------------------------- ranking hinges at exactly zero violation
# Exact binary fractions: margin 0.25, positives 0.75, a negative at 0.5 (exactly margin below:
# 0.25 + 0.5 - 0.75 = 0) and one at 0.5 + 2^-10 (violation 2^-10, exact in float32).
EPS = 2.0 ** -10


def test_a_negative_exactly_margin_below_the_positive_costs_nothing_just_above_costs_its_violation():
    h = ranking_hinges(torch.tensor([[0.75, 0.5, 0.5 + EPS]]), torch.tensor([0.75]),
                       torch.tensor([[False, True, True]]), margin=0.25)
    assert h.tolist() == [[0.0, 0.0, EPS]]
    # S: images x captions, caption c belongs to image c. Image-anchored: caption 0 vs caption 1:
    # 0.25 + S[0, 1] - S[0, 0] = 0; caption 1 vs caption 0: 0.25 + S[1, 0] - S[1, 1] = 2^-10.
    # Caption-anchored: caption 0 vs image 1: 0.25 + S[1, 0] - S[0, 0] = 2^-10; caption 1 vs image 0: 0.
    s = torch.tensor([[0.75, 0.5], [0.5 + EPS, 0.75]])
    for negatives in ("all", "hardest", "topk"):
        out = _loss(s, [0, 1], [0, 1], negatives=negatives, margin=0.25)
        assert out["loss_image_anchored"].item() == EPS
        assert out["loss_caption_anchored"].item() == EPS
    # a margin a hair smaller makes the boundary negative free too; a hair larger charges it
    out = _loss(s, [0, 1], [0, 1], negatives="all", margin=0.25 - EPS)
    assert out["loss_image_anchored"].item() == 0.0
    out = _loss(s, [0, 1], [0, 1], negatives="all", margin=0.25 + EPS)
    assert out["loss_image_anchored"].item() == EPS + 2 * EPS  # 2^-10 from the boundary one, 2^-9 from the other


def test_top_k_at_the_number_of_negatives():
    # 12 images / captions, margin 0: column 0 (caption 0, positive S[0, 0] = 0) has negatives
    # S[i, 0] = i / 16 for i = 1..11, i.e. 11 violations i / 16; every other hinge is negative
    # (S[c, c] = 1 > S[c, c'] for c >= 1, S[0, c'] = -10).
    n = 12
    s = torch.full((n, n), -10.0)
    s[torch.arange(n), torch.arange(n)] = 1.0
    s[0, 0] = 0.0
    s[1:, 0] = torch.arange(1, n, dtype=torch.float32) / 16
    expected = {1: 11 / 16, 10: sum(range(2, 12)) / 16, 11: sum(range(1, 12)) / 16, 12: sum(range(1, 12)) / 16}
    for k, value in expected.items():  # K = 10 (paper 000) drops only the smallest; K >= 11 sums all (66/16)
        out = _loss(s, list(range(n)), list(range(n)), negatives="topk", topk=k, margin=0.0)
        assert out["loss_caption_anchored"].item() == pytest.approx(value, abs=1e-6)
        assert out["loss_image_anchored"].item() == 0.0
    assert RankingLoss(negatives="topk").topk == 10
    for negatives, value in (("all", 66 / 16), ("hardest", 11 / 16)):  # sum of hinges vs max of hinges
        out = _loss(s, list(range(n)), list(range(n)), negatives=negatives, margin=0.0)
        assert out["loss_caption_anchored"].item() == pytest.approx(value)
    # reduce_hinges directly: K = G - 1, G, G + 1 of one row of G = 3 hinges (1, 2, 4) / 8
    h = torch.tensor([[1.0, 2.0, 4.0]]) / 8
    assert [reduce_hinges(h, "topk", k).item() for k in (2, 3, 4)] == [6 / 8, 7 / 8, 7 / 8]


# ---------------------------------------------------------------- Embedding Network and CITE IoU thresholds
def _targets(iou):
    iou = torch.tensor(iou, dtype=torch.float32)
    return PhraseTargets(iou, torch.ones_like(iou, dtype=torch.bool))


def test_embedding_net_positive_at_iou_exactly_0_6_and_negative_strictly_below_0_3():
    # one phrase, regions at IoU 0.6 (positive), 0.3 (neither: negatives are IoU < 0.3), 0.3 - 1 ulp (negative).
    # logits 0.5, 0.9, 0.75: the one violation 0.05 + 0.75 - 0.5 = 0.3; k = 5 * 1 = 5 > 1 -> mean 0.3.
    # Mutants: pos > 0.6 -> no positive, loss 0; neg <= 0.3 -> violations (0.3, 0.05 + 0.9 - 0.5 = 0.45), mean 0.375.
    clf = EmbeddingNetClassifier(None, 4, 4)
    logits = torch.tensor([[0.5, 0.9, 0.75]])
    emb = torch.eye(3)[:, :2]  # unused by the cross-modal term (one phrase, one positive: no neighbourhood)
    losses = clf.losses(logits, emb, emb[:1], _targets([[0.6, 0.3, _below(0.3)]]))
    assert losses["loss_phrase_cls"].item() == pytest.approx(0.3, abs=1e-6)
    # exactly zero violation (a negative 0.05 below the positive) adds nothing but counts in the mean of the top k
    losses = clf.losses(torch.tensor([[0.5, 0.45, 0.75]]), emb, emb[:1], _targets([[0.6, 0.0, 0.0]]))
    assert losses["loss_phrase_cls"].item() == pytest.approx(0.3 / 2, abs=1e-6)


def test_cite_label_thresholds_at_their_boundaries():
    clf = CITEClassifier(None, 5, 4)
    sampled = lambda iou: PhraseTargets(torch.tensor(iou), torch.ones(len(iou), len(iou[0]), dtype=torch.bool))  # noqa: E731
    for seed in range(10):
        torch.manual_seed(seed)
        # r0 IoU 0.6: positive (>= 0.6) -> 2 negatives needed. Below 0.3: r2 (0.3 - 1 ulp) and r3 (0) -- exactly 2,
        # so no fallback; r1 (exactly 0.3) and r4 (0.35) stay unlabelled.
        # Mutants: neg <= 0.3 -> 2 of {r1, r2, r3} at random; fallback on len <= need -> 2 of {r1..r4}.
        labels = clf.sample_labels(sampled([[0.6, 0.3, _below(0.3), 0.0, 0.35]]))
        assert labels.tolist() == [[1, 0, -1, -1, 0]]
        # r0 at 0.6 again; nothing below 0.3 -> fallback IoU < 0.4: only r2 (0.4 - 1 ulp); r1 (exactly 0.4) never.
        labels = clf.sample_labels(sampled([[0.6, 0.4, _below(0.4), 0.5]]))
        assert labels.tolist() == [[1, 0, -1, 0]]
        # IoU just below 0.6 is no positive: no labels for the phrase, then the image's one forced negative
        labels = clf.sample_labels(sampled([[_below(0.6), 0.1]]))
        assert labels.tolist() == [[0, -1]]
