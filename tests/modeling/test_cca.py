"""Closed-form CCA from phrase-grouped streamed moments."""
import numpy as np
import pytest

from phrasedet.modeling.cca import CCAProjection, PhraseGroupedMoments, fit_cca


def _synthetic(n, rho=(0.9, 0.6), seed=0):
    """x (5-d) and y (4-d), linearly mixed, whose canonical correlations are rho and then 0."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 2))
    x = np.column_stack([z, rng.standard_normal((n, 3))]) @ rng.standard_normal((5, 5))
    e = rng.standard_normal((n, 4))
    y_lat = np.column_stack([r * z[:, i] + np.sqrt(1 - r * r) * e[:, i] for i, r in enumerate(rho)] + [e[:, 2], e[:, 3]])
    return x, y_lat @ rng.standard_normal((4, 4))


def _moments(x, table, ids, batches=3):
    m = PhraseGroupedMoments(x.shape[1], len(table))
    for part in np.array_split(np.arange(len(x)), batches):
        m.add(x[part], ids[part])
    return m


def test_grouped_streamed_covariances_equal_the_dense_ones():
    rng = np.random.default_rng(1)
    table = rng.standard_normal((7, 3))  # 7 phrases shared by 50 pairs
    ids = rng.integers(0, 7, 50)
    x = rng.standard_normal((50, 4))
    mean_x, mean_y, s11, s22, s12 = _moments(x, table, ids).covariances(table)
    y = table[ids]
    full = np.cov(np.hstack([x, y]).T)  # normalized by n - 1
    np.testing.assert_allclose(mean_x, x.mean(0))
    np.testing.assert_allclose(mean_y, y.mean(0))
    np.testing.assert_allclose(s11, full[:4, :4], atol=1e-12)
    np.testing.assert_allclose(s22, full[4:, 4:], atol=1e-12)
    np.testing.assert_allclose(s12, full[:4, 4:], atol=1e-12)


def test_recovers_known_canonical_correlations_and_whitens():
    x, y = _synthetic(40000)
    cca = fit_cca(_moments(x, y, np.arange(len(y))), y, ridge=1e-6, power=1.0)
    np.testing.assert_allclose(cca.correlations[:2], [0.9, 0.6], atol=0.01)
    assert np.all(cca.correlations[2:] < 0.03)
    px, py = (x - cca.mean_x) @ cca.A, (y - cca.mean_y) @ cca.B
    np.testing.assert_allclose(np.cov(px.T), np.eye(4), atol=1e-3)  # whitened views
    corr = [np.corrcoef(px[:, i], py[:, i])[0, 1] for i in range(4)]
    np.testing.assert_allclose(corr, cca.correlations, atol=1e-3)
    np.testing.assert_allclose(cca.project_regions(x[:3]), px[:3] * cca.correlations)  # normalized CCA, power 1
    np.testing.assert_allclose(fit_cca(_moments(x, y, np.arange(len(y))), y, ridge=1e-6, power=4).scale, cca.correlations ** 4)


def test_agrees_with_scikit_learn_on_a_small_case():
    sklearn_cca = pytest.importorskip("sklearn.cross_decomposition").CCA
    x, y = _synthetic(3000, rho=(0.8, 0.5), seed=2)
    ours = fit_cca(_moments(x, y, np.arange(len(y))), y, dim=2, ridge=0.0)
    ref = sklearn_cca(n_components=2, scale=False, max_iter=5000, tol=1e-12).fit(x, y)
    xs, ys = ref.transform(x, y)
    ref_corr = [np.corrcoef(xs[:, i], ys[:, i])[0, 1] for i in range(2)]
    np.testing.assert_allclose(ours.correlations, ref_corr, atol=1e-4)
    px = (x - ours.mean_x) @ ours.A
    for i in range(2):  # the same directions, up to sign
        assert abs(np.corrcoef(px[:, i], xs[:, i])[0, 1]) > 0.9999


@pytest.mark.parametrize("regions, ids, message", [
    (np.zeros((2, 4)), [0, 1], "regions (2, 4) and phrase_ids (2,) do not match D_x = 3"),  # D_x
    (np.zeros((2, 3)), [0], "regions (2, 3) and phrase_ids (1,) do not match D_x = 3"),  # one id for two rows
    (np.zeros(3), [0, 1, 2], "regions (3,) and phrase_ids (3,) do not match D_x = 3"),  # not [N, D_x]
])
def test_bad_input_is_named(regions, ids, message):
    m = PhraseGroupedMoments(3, 2)
    with pytest.raises(ValueError) as e:
        m.add(regions, ids)
    assert str(e.value) == message
    assert m.n == 0


def test_one_pair_is_refused_and_two_are_enough():
    m = PhraseGroupedMoments(1, 2)
    m.add([[0.0]], [0])
    with pytest.raises(ValueError) as e:
        m.covariances([[1.0], [3.0]])
    assert str(e.value) == "CCA needs at least 2 pairs, got 1"
    # pairs (0, 1) and (2, 3): means 1 and 2, and every (co)variance ((-1)^2 + 1^2) / (2 - 1) = 2
    m.add([[2.0]], [1])
    mean_x, mean_y, s11, s22, s12 = m.covariances([[1.0], [3.0]])
    assert (mean_x.tolist(), mean_y.tolist(), s11.tolist(), s22.tolist(), s12.tolist()) == ([1.0], [2.0], [[2.0]], [[2.0]], [[2.0]])


@pytest.mark.parametrize("bad_region, bad_phrase, side", [
    (np.nan, 0.0, "region"),
    (np.inf, 0.0, "region"),
    (0.0, np.nan, "phrase"),
    (0.0, -np.inf, "phrase"),
    (1e200, 0.0, "region"),  # finite features whose squares overflow float64
    (np.nan, np.nan, "region"),  # both bad: the regions are named first
])
def test_non_finite_covariances_are_refused_naming_the_side(bad_region, bad_phrase, side):
    """A NaN or inf feature (or one whose square overflows) would give NaN layers, or a scipy
    error deep in a decomposition: the fit names which side's features are at fault instead."""
    x, table = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]]), np.array([[1.0], [2.0], [4.0]])
    x[1, 0], table[2, 0] = bad_region or x[1, 0], bad_phrase or table[2, 0]
    with pytest.raises(ValueError) as e, np.errstate(over="ignore", invalid="ignore"):
        fit_cca(_moments(x, table, np.arange(3), batches=1), table)
    assert str(e.value) == (f"CCA: the {side} covariance holds values that are not finite "
                            f"(NaN or inf {side} features, or sums too large for float64)")


def test_large_finite_features_are_fitted():
    """1e150 squared is 1e300, still a float64: such features are fitted, not refused (without a
    ridge, which would be negligible at that scale, the correlations are those of x itself)."""
    x, y = _synthetic(200)
    big = fit_cca(_moments(x * 1e150, y, np.arange(200)), y, ridge=0.0)
    small = fit_cca(_moments(x, y, np.arange(200)), y, ridge=0.0)
    np.testing.assert_allclose(big.correlations, small.correlations, rtol=1e-6)


def test_an_empty_batch_adds_nothing():
    """A batch without pairs (``phrase_ids`` an empty list) leaves the moments as they were."""
    m = PhraseGroupedMoments(2, 3)
    m.add([[1.0, 2.0]], [1])
    m.add(np.zeros((0, 2)), [])
    assert m.n == 1
    assert m.sum_x.tolist() == [1.0, 2.0] and m.sum_xx.tolist() == [[1.0, 2.0], [2.0, 4.0]]
    assert m.region_sum_per_phrase.tolist() == [[0.0, 0.0], [1.0, 2.0], [0.0, 0.0]]
    assert m.count_per_phrase.tolist() == [0.0, 1.0, 0.0]


def test_float32_regions_are_accumulated_in_float64():
    """4097^2 + 1^2 = 16785410 is exact in float64; a float32 product would round it (float32 holds
    integers exactly only up to 2^24 = 16777216)."""
    m = PhraseGroupedMoments(1, 1)
    m.add(np.array([[4097.0], [1.0]], dtype=np.float32), [0, 0])
    assert m.sum_xx.tolist() == [[16785410.0]]
    assert m.region_sum_per_phrase.tolist() == [[4098.0]]


def test_the_default_chunk_is_2048_phrase_rows():
    rng = np.random.default_rng(4)
    table = rng.standard_normal((4098, 2))  # two chunks and a bit
    m = _moments(rng.standard_normal((4098, 2)), table, np.arange(4098), batches=1)
    for a, b in zip(m.covariances(table), m.covariances(table, chunk_rows=2048)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("side", ["regions", "phrases"])
def test_projections_are_computed_in_float64_whatever_the_stored_dtype(side):
    """A CCA file may hold float32 arrays: the projection is still float64 (1/3 is not a float32)."""
    f32 = np.float32
    cca = CCAProjection(np.array([0.0], f32), np.array([0.0], f32), np.array([[1.0]], f32), np.array([[1.0]], f32),
                        np.array([1.0], f32), np.array([3.0], f32))
    out = getattr(cca, f"project_{side}")(np.array([[1.0]], f32) / f32(9.0))
    assert out.dtype == np.float64
    assert out.tolist() == [[float(f32(1.0) / f32(9.0)) * 3.0]]


def test_stacked_layers_second_fitted_on_relu_of_first():
    from phrasedet.modeling.cca.fitting import fit_stacked_cca

    x, y = _synthetic(5000)
    batches = lambda: ((x[i:i + 1000], np.arange(i, min(i + 1000, len(x)))) for i in range(0, len(x), 1000))  # noqa: E731
    l1, l2 = fit_stacked_cca(batches, y, dims=(4, 3), ridge=1e-6)
    np.testing.assert_allclose(l1.correlations, fit_cca(_moments(x, y, np.arange(len(y))), y, 4, 1e-6).correlations)
    hx = np.maximum(l1.project_regions(x), 0)
    hy = np.maximum(l1.project_phrases(y), 0)
    direct = fit_cca(_moments(hx, hy, np.arange(len(hy))), hy, 3, 1e-6)
    np.testing.assert_allclose(l2.correlations, direct.correlations, rtol=1e-9)
    np.testing.assert_allclose(np.abs(l2.A), np.abs(direct.A), rtol=1e-6, atol=1e-9)


def test_replayable_runs_the_producer_once_when_it_fits():
    from phrasedet.modeling.cca.fitting import replayable

    calls = []

    def produce():
        calls.append(1)
        for i in range(3):
            yield (np.full((2, 2), i, dtype=np.float64), np.array([i, i]))

    small = replayable(produce)
    assert [b[1].tolist() for b in small()] == [b[1].tolist() for b in small()] == [[0, 0], [1, 1], [2, 2]]
    assert len(calls) == 1
    calls.clear()
    big = replayable(produce, max_bytes=40)  # the second batch overflows: every call produces again
    assert len(list(big())) == len(list(big())) == 3 and len(calls) == 2


def test_collect_positive_pairs_takes_the_best_proposal_per_phrase_instance(builtin_root):
    import os

    import torch
    from detectron2.config import get_cfg
    from detectron2.data import DatasetCatalog
    from detectron2.modeling import build_model
    from detectron2.structures import Boxes, Instances

    from phrasedet.config import add_phrasedet_config
    from phrasedet.data import PhraseDatasetMapper
    from phrasedet.modeling.cca.fitting import collect_positive_pairs

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(os.path.dirname(__file__), "..", "..", "configs", "qa_rcnn.yaml"))
    cfg.merge_from_list(["PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1, "PHRASEDET.TEXT.WORD2VEC_DIM", 16])
    torch.manual_seed(0)
    model = build_model(cfg)
    mapper = PhraseDatasetMapper(cfg, is_train=False)
    inputs = [mapper(d) for d in DatasetCatalog.get("builtin_flickr30k_entities_train")[:3]]

    def proposals_near_gt(images, features, gt):  # proposals: each GT box shifted by 0 and by 40 % of its size
        out = []
        for x, size in zip(inputs, images.image_sizes):
            b = x["instances"].gt_boxes.tensor
            shift = (b[:, 2:] - b[:, :2]).repeat(1, 2) * 0.4
            p = Instances(size)
            p.proposal_boxes = Boxes(torch.cat([b + shift, b]))
            out.append(p)
        return out, {}

    model.proposal_generator.forward = proposals_near_gt
    phrases = sorted({p for x in inputs for p in x["phrases"]})
    index = {p: i for i, p in enumerate(phrases)}
    (regions, ids), = list(collect_positive_pairs(model, [inputs], index, iou_thresh=0.6, max_pairs_per_image=100))
    # every GT instance's exact box (IoU 1) is among the proposals; the shifted copies (IoU < 0.6) never win
    expected = [index[x["phrases"][i]] for x in inputs for i in x["instances"].gt_phrase_ids.tolist()]
    assert sorted(ids.tolist()) == sorted(expected)
    assert regions.shape == (len(ids), model.roi_heads.region_features.output_dim)
    (_, capped), = list(collect_positive_pairs(model, [inputs], index, iou_thresh=0.6, max_pairs_per_image=2))
    assert len(capped) == sum(min(2, len(x["instances"])) for x in inputs)
    assert not list(collect_positive_pairs(model, [inputs], index, iou_thresh=1.01))  # no pair: nothing yielded


def test_chunked_phrase_side_equals_one_chunk_and_float32_table_is_upcast_exactly():
    rng = np.random.default_rng(3)
    table = rng.standard_normal((30, 6)).astype(np.float32)  # 30 phrases, 4 of them never paired
    ids = rng.choice(26, 200)
    m = _moments(rng.standard_normal((200, 5)), table, ids)
    one_chunk = m.covariances(table, chunk_rows=1000)
    for chunked in (m.covariances(table, chunk_rows=4), m.covariances(table, chunk_rows=1)):
        for a, b in zip(chunked, one_chunk):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    for a, b in zip(m.covariances(table.astype(np.float64), chunk_rows=4), m.covariances(table, chunk_rows=4)):
        np.testing.assert_array_equal(a, b)


def _aligned(a, b):
    """``a`` with each column's sign flipped to match ``b``'s (singular vectors are signed freely)."""
    return a * np.sign(np.sum(a * b, axis=0))


def test_cholesky_whitening_gives_the_inverse_square_root_fit(monkeypatch):
    from phrasedet.modeling.cca import linear as cca_module

    x, y = _synthetic(5000)
    moments = _moments(x, y, np.arange(len(y)))
    fast = fit_cca(moments, y, dim=3, ridge=1e-4, power=2)
    assert cca_module._Whitening(np.eye(2)).lower is not None  # positive definite: the Cholesky path
    monkeypatch.setattr(cca_module, "_cholesky", lambda s: None)  # the released code's S^-1/2 everywhere
    slow = fit_cca(moments, y, dim=3, ridge=1e-4, power=2)
    np.testing.assert_allclose(fast.correlations, slow.correlations, rtol=1e-12)
    np.testing.assert_allclose(fast.scale, slow.scale, rtol=1e-12)
    np.testing.assert_allclose(_aligned(fast.A, slow.A), slow.A, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(_aligned(fast.B, slow.B), slow.B, rtol=1e-9, atol=1e-12)


def test_singular_covariance_without_ridge_falls_back_to_the_clamped_inverse_square_root():
    from phrasedet.modeling.cca import linear as cca_module

    x, y = _synthetic(2000)
    y = np.column_stack([y, np.zeros(len(y))])  # a dead phrase feature (a ReLU unit of layer 1): S22 is singular
    s22 = _moments(x, y, np.arange(len(y))).covariances(y)[3]
    assert cca_module._cholesky(s22) is None
    cca = fit_cca(_moments(x, y, np.arange(len(y))), y, dim=2, ridge=0.0)
    assert np.all(np.isfinite(cca.B)) and np.allclose(cca.B[-1], 0)
    np.testing.assert_allclose(cca.correlations, [0.9, 0.6], atol=0.02)
