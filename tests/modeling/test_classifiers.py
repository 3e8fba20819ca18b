"""Region classifiers CCA, Embedding Network and CITE: hand-computed losses, shapes, training, registry."""
import numpy as np
import pytest
import torch
from detectron2.config import CfgNode as CN
from detectron2.config import get_cfg

from phrasedet.config import add_phrasedet_config
from phrasedet.modeling.cca.fitting import fit_stacked_cca
from phrasedet.modeling.classifiers import (
    REGION_CLASSIFIER_REGISTRY,
    CCAClassifier,
    CITEClassifier,
    EmbeddingNetClassifier,
    PhraseTargets,
    build_region_classifier,
)


def _targets(iou, sampled=None):
    iou = torch.tensor(iou, dtype=torch.float32)
    return PhraseTargets(iou, torch.ones_like(iou, dtype=torch.bool) if sampled is None else torch.tensor(sampled))


def _two_layer_cca(seed=0, n=300, dx=8, dy=6, vocab=30):
    """Layer 1 fitted on (x, y), layer 2 on their ReLU'd layer-1 projections (tools/compute_cca.py)."""
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((vocab, dy))
    ids = rng.integers(0, vocab, n)
    x = table[ids] @ rng.standard_normal((dy, dx)) + 0.3 * rng.standard_normal((n, dx)) + 1.0
    return fit_stacked_cca(lambda: iter([(x, ids)]), table, dims=(5, 3)), x, table


# ---------------------------------------------------------------- CCA


def test_cca_classifier_raises_before_loading_and_scores_cosines_after():
    (p1, p2), x, table = _two_layer_cca()
    clf = CCAClassifier(None, 8, 6)
    regions, phrases = torch.tensor(x[:7], dtype=torch.float32), torch.tensor(table[:3], dtype=torch.float32)
    with pytest.raises(RuntimeError, match="CCA not fitted"):
        clf(regions, phrases)
    clf.load_projection(p1)
    logits, losses = clf(regions, phrases, _targets(np.zeros((3, 7))))
    assert logits.shape == (3, 7) and losses == {}
    px, py = p1.project_regions(x[:7]), p1.project_phrases(table[:3])
    expected = (py / np.linalg.norm(py, axis=1, keepdims=True)) @ (px / np.linalg.norm(px, axis=1, keepdims=True)).T
    np.testing.assert_allclose(logits.numpy(), expected, atol=1e-4)
    assert not [p for p in clf.parameters() if p.requires_grad]
    with pytest.raises(ValueError):
        CCAClassifier(None, 9, 6).load_projection(p1)


def test_cca_classifier_stacked_layers_and_checkpoint_round_trip():
    projs, x, table = _two_layer_cca()
    clf = CCAClassifier(None, 8, 6)
    clf.load_projection(projs)
    regions, phrases = torch.tensor(x[:5], dtype=torch.float32), torch.tensor(table[:4], dtype=torch.float32)
    logits, _ = clf(regions, phrases)
    px = projs[1].project_regions(np.maximum(projs[0].project_regions(x[:5]), 0))
    py = projs[1].project_phrases(np.maximum(projs[0].project_phrases(table[:4]), 0))
    expected = (py / np.linalg.norm(py, axis=1, keepdims=True)) @ (px / np.linalg.norm(px, axis=1, keepdims=True)).T
    np.testing.assert_allclose(logits.numpy(), expected, atol=1e-4)
    fresh = CCAClassifier(None, 8, 6)
    fresh.load_state_dict(clf.state_dict())
    assert torch.allclose(fresh(regions, phrases)[0], logits)


# ---------------------------------------------------------------- Embedding Network

# 2 phrases x 3 regions, 2-d unit embeddings: regions r0 = (1, 0), r1 = (0, 1), r2 = (0.8, 0.6);
# phrases p0 = (1, 0), p1 = (0, 1): S = [[1, 0, 0.8], [0, 1, 0.6]].
# p0: positive r1, negatives r0, r2.  p1: positives r1, r2, negative r0.
_REGIONS = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.8, 0.6]])
_PHRASES = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
_IOU = [[0.1, 0.7, 0.2], [0.0, 0.8, 0.65]]


def test_embedding_loss_equals_hand_computation():
    clf = EmbeddingNetClassifier(None, 4, 4)
    logits = _PHRASES @ _REGIONS.t()
    losses = clf.losses(logits, _REGIONS, _PHRASES, _targets(_IOU))
    # cross-modal, same phrase: p0: 0.05 + 1 - 0 = 1.05, 0.05 + 0.8 - 0 = 0.85; p1: 0.05 + 0 - 1, 0.05 + 0 - 0.6 -> 0, 0.
    # k = 5 * 2 = 10 > 4 violations: mean of all four
    assert losses["loss_phrase_cls"].item() == pytest.approx(1.9 / 4, abs=1e-6)
    # region neighbourhood (p1's positives r1, r2; negative r0; C(r1, r2) = 0.6, C(r2, r0) = 0.8, C(r1, r0) = 0):
    # anchor r1: 0.05 + 0 - 0.6 -> 0; anchor r2: 0.05 + 0.8 - 0.6 = 0.25; mean 0.125, weight 0.1
    assert losses["loss_region_nbr"].item() == pytest.approx(0.0125, abs=1e-6)
    assert losses["loss_phrase_nbr"].item() == 0.0  # 2 phrases: no (anchor, neighbour, non-neighbour)
    # top-k: k = 1 * 2 -> mean(1.05, 0.85)
    small_k = EmbeddingNetClassifier(None, 4, 4, topk_per_phrase=1).losses(logits, _REGIONS, _PHRASES, _targets(_IOU))
    assert small_k["loss_phrase_cls"].item() == pytest.approx(0.95, abs=1e-6)
    # the code's pooled variant: positives (p0 r1: 0, p1 r1: 1, p1 r2: 0.6) x negatives (p0 r0: 1, p0 r2: 0.8, p1 r0: 0)
    pooled = EmbeddingNetClassifier(None, 4, 4, pool_phrases=True).losses(logits, _REGIONS, _PHRASES, _targets(_IOU))
    hand = [1.05, 0.85, 0.05, 0.05, 0, 0, 0.45, 0.25, 0]
    assert pooled["loss_phrase_cls"].item() == pytest.approx(sum(hand) / 9, abs=1e-6)
    # unsampled entries are ignored: drop p0's negative r0
    sampled = [[False, True, True], [True, True, True]]
    part = clf.losses(logits, _REGIONS, _PHRASES, _targets(_IOU, sampled))
    assert part["loss_phrase_cls"].item() == pytest.approx(0.85 / 3, abs=1e-6)


def test_embedding_phrase_neighbourhood_hand_computation():
    # p0 = (1, 0) and p1 = (0.6, 0.8) share positive r0 (neighbours); p2 = (0.8, 0.6) positive on r1.
    phrases = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.8, 0.6]])
    regions = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    iou = [[0.9, 0.0], [0.7, 0.1], [0.0, 0.9]]
    losses = EmbeddingNetClassifier(None, 4, 4).losses(phrases @ regions.t(), regions, phrases, _targets(iou))
    # anchor p0: 0.05 + T(p0, p2) - T(p0, p1) = 0.05 + 0.8 - 0.6 = 0.25; anchor p1: 0.05 + 0.96 - 0.6 = 0.41
    assert losses["loss_phrase_nbr"].item() == pytest.approx(0.1 * (0.25 + 0.41) / 2, abs=1e-6)


def test_embedding_forward_shapes_and_no_targets():
    clf = EmbeddingNetClassifier(None, 12, 7, hidden_dim=16, embed_dim=8)
    logits, losses = clf(torch.randn(10, 12), torch.randn(3, 7))
    assert logits.shape == (3, 10) and losses == {}
    assert logits.abs().max() <= 1 + 1e-5
    _, losses = clf(torch.randn(10, 12), torch.randn(3, 7), _targets(np.zeros((3, 10))))  # no positives
    assert all(v.item() == 0 for v in losses.values())


def test_embedding_cca_init_matches_stacked_cca_and_regularizer_starts_at_zero():
    projs, x, table = _two_layer_cca()
    clf = EmbeddingNetClassifier(None, 8, 6)
    clf.init_from_cca(projs)
    cca = CCAClassifier(None, 8, 6)
    cca.load_projection(projs)
    regions, phrases = torch.tensor(x[:6], dtype=torch.float32), torch.tensor(table[:3], dtype=torch.float32)
    logits, losses = clf(regions, phrases, _targets(np.random.default_rng(0).random((3, 6))))
    assert logits.shape == (3, 6)
    assert torch.allclose(logits, cca(regions, phrases)[0], atol=1e-4)  # b = 0: the stacked CCA exactly
    assert losses["loss_cca_reg"].item() == 0.0


# ---------------------------------------------------------------- CITE


def _hand_cite(clf, regions, phrases):
    """CITE's forward in numpy from the module's weights (eval mode: BN with running statistics)."""
    n = lambda t: t.detach().double().numpy()  # noqa: E731
    relu = lambda v: np.maximum(v, 0)  # noqa: E731

    def branch(b, v):
        l1, l2 = b.layers
        h = relu((v - n(l1.mean)) @ n(l1.weight) + n(l1.bias)) * n(l1.scale)
        h = ((h - n(l2.mean)) @ n(l2.weight) + n(l2.bias)) * n(l2.scale)
        return h / np.linalg.norm(h, axis=1, keepdims=True)

    def fcbnrelu(m, v):
        z = v @ n(m.fc.weight).T + n(m.fc.bias)
        z = (z - n(m.bn.running_mean)) / np.sqrt(n(m.bn.running_var) + m.bn.eps) * n(m.bn.weight) + n(m.bn.bias)
        return relu(z)

    er, ep = branch(clf.region_branch, n(regions)), branch(clf.phrase_branch, n(phrases))
    a = fcbnrelu(clf.concept_hidden, n(phrases)) @ n(clf.concept_logits.weight).T + n(clf.concept_logits.bias)
    w = np.exp(a) / np.exp(a).sum(1, keepdims=True)
    out = np.zeros((len(ep), len(er)))
    for p in range(len(ep)):
        for r in range(len(er)):
            j = fcbnrelu(clf.joint, (ep[p] * er[r])[None])
            mixed = sum(w[p, k] * fcbnrelu(c, j) for k, c in enumerate(clf.concepts))
            out[p, r] = (mixed @ n(clf.score.weight).T + n(clf.score.bias))[0, 0]
    return out, a


def test_cite_forward_and_loss_equal_hand_computation():
    torch.manual_seed(0)
    clf = CITEClassifier(None, 5, 4, hidden_dim=6, embed_dim=3, joint_dim=4, concept_dim=3, num_concepts=2)
    with torch.no_grad():  # non-trivial BN statistics and biases
        for m in clf.modules():
            if isinstance(m, torch.nn.BatchNorm1d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(0.0, 0.5)
    clf.eval()
    regions, phrases = torch.randn(4, 5), torch.randn(2, 4)
    # per phrase: one positive and exactly two candidates below 0.3 -> all labelled deterministically
    iou = [[0.7, 0.1, 0.2, 0.5], [0.45, 0.35, 0.9, 0.25]]  # p1: only r3 < 0.3, fallback < 0.4 adds r1
    logits, losses = clf(regions, phrases, _targets(iou))
    hand, a = _hand_cite(clf, regions, phrases)
    np.testing.assert_allclose(logits.detach().numpy(), hand, atol=1e-5)
    c = hand
    pairs = [(c[0, 0], 1), (c[0, 1], -1), (c[0, 2], -1), (c[1, 2], 1), (c[1, 3], -1), (c[1, 1], -1)]
    expected = np.mean([np.log1p(np.exp(-l * v)) for v, l in pairs])
    assert losses["loss_phrase_cls"].item() == pytest.approx(expected, abs=1e-5)
    assert losses["loss_concept_l1"].item() == pytest.approx(5e-5 * np.abs(a).sum() / 2, rel=1e-4)


def test_cite_sampling_respects_two_to_one_and_the_sampled_mask():
    torch.manual_seed(0)
    clf = CITEClassifier(None, 5, 4)
    iou = torch.zeros(3, 20)
    iou[0, :2] = 0.8  # 2 positives, 18 negatives < 0.3 -> 4 negatives
    iou[1, 0] = 0.9
    iou[1, 1:4] = 0.35  # 1 positive, below 0.3 only r4..r19 ... restricted by `sampled` below
    iou[2, :] = 0.1  # no positives -> no labels for this phrase
    sampled = torch.ones(3, 20, dtype=torch.bool)
    sampled[1, 5:] = False  # p1 candidates: r4 (< 0.3), r1..r3 (< 0.4)
    labels = clf.sample_labels(PhraseTargets(iou, sampled))
    assert (labels[0] == 1).sum() == 2 and (labels[0] == -1).sum() == 4
    assert (labels[0, :2] == 1).all()
    assert (labels[1] == 1).sum() == 1 and (labels[1] == -1).sum() == 2  # fallback to < 0.4
    assert not labels[1, 5:].any() and (labels[1, 1:5] == -1).sum() == 2
    assert not labels[2].any()
    none = clf.sample_labels(PhraseTargets(torch.zeros(2, 5), torch.ones(2, 5, dtype=torch.bool)))
    assert (none == -1).sum() == 1 and (none == 1).sum() == 0  # at least one negative in the image


def test_cite_shapes_single_pair_and_cca_init():
    projs, x, table = _two_layer_cca()
    clf = CITEClassifier(None, 8, 6, hidden_dim=8, embed_dim=4, joint_dim=8, concept_dim=4)
    clf.init_from_cca(projs)
    assert clf.joint.fc.in_features == 3  # layer 2's CCA dimension
    regions, phrases = torch.tensor(x[:6], dtype=torch.float32), torch.tensor(table[:3], dtype=torch.float32)
    logits, losses = clf(regions, phrases, _targets(np.random.default_rng(0).random((3, 6))))
    assert logits.shape == (3, 6) and losses["loss_cca_reg"].item() == 0.0
    logits, _ = clf(regions[:1], phrases[:1], _targets([[0.9]]))  # one pair in training mode
    assert logits.shape == (1, 1)
    clf.eval()
    assert clf(regions, phrases)[0].shape == (3, 6)


# ---------------------------------------------------------------- training and registry


def _task(seed=0, num_phrases=3, num_regions=16, dr=12, dt=7):
    g = torch.Generator().manual_seed(seed)
    regions, phrases = torch.randn(num_regions, dr, generator=g), torch.randn(num_phrases, dt, generator=g)
    iou = torch.rand(num_phrases, num_regions, generator=g) * 0.3
    for p in range(num_phrases):
        iou[p, 4 * p : 4 * p + 2] = 0.8
    return regions, phrases, PhraseTargets(iou, torch.ones_like(iou, dtype=torch.bool))


@pytest.fixture
def one_thread():
    """Tiny tensors: intra-op threads only add overhead (and stall on a busy 2-core machine)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.mark.parametrize("name", ["EmbeddingNetClassifier", "CITEClassifier"])
def test_classifier_trains(name, one_thread):
    torch.manual_seed(0)
    regions, phrases, targets = _task()
    clf = REGION_CLASSIFIER_REGISTRY.get(name)(None, 12, 7, hidden_dim=32, embed_dim=16)
    opt = torch.optim.Adam(clf.parameters(), lr=1e-2)
    history = []
    for _ in range(60):
        _, losses = clf(regions, phrases, targets)
        loss = sum(losses.values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(loss.item())
    assert np.mean(history[-5:]) < 0.5 * np.mean(history[:5])
    clf.eval()
    logits, _ = clf(regions, phrases)
    pos = targets.iou >= 0.6
    assert logits[pos].mean() > logits[~pos].mean()


@pytest.mark.parametrize("name", ["QARCNNClassifier", "CCAClassifier", "EmbeddingNetClassifier", "CITEClassifier"])
def test_registry_builds_each_from_the_default_config(name):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER = name
    clf = build_region_classifier(cfg, 12, 7)
    assert type(clf) is REGION_CLASSIFIER_REGISTRY.get(name)


def test_config_node_overrides_defaults_and_keywords_override_config():
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET = CN({"EMBED_DIM": 16, "MARGIN": 0.1})
    clf = EmbeddingNetClassifier(cfg, 12, 7)
    assert clf.region_branch.out_features == 16 and clf.options["margin"] == 0.1
    assert clf.options["hidden_dim"] == EmbeddingNetClassifier.DEFAULTS["hidden_dim"]
    assert EmbeddingNetClassifier(cfg, 12, 7, embed_dim=8).phrase_branch.out_features == 8
    with pytest.raises(TypeError):
        CITEClassifier(cfg, 12, 7, no_such_option=1)


# ---------------------------------------------------------------- phrase-side split (inference)


def _fitted(name):
    clf = build_region_classifier(_cfg_for(name), 8, 6)
    if name == "CCAClassifier":
        clf.load_projection(_two_layer_cca()[0][0])
    elif name == "EmbeddingNetClassifier":
        clf.init_from_cca(_two_layer_cca()[0])  # CITE stays random: its BN layers run on running stats
    return clf.eval()


def _cfg_for(name):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER = name
    return cfg


@pytest.mark.parametrize("name", ["QARCNNClassifier", "CCAClassifier", "EmbeddingNetClassifier", "CITEClassifier"])
def test_encoded_scoring_equals_forward_and_region_index_picks_pairs(name):
    torch.manual_seed(0)
    clf = _fitted(name)
    regions, phrases = torch.randn(7, 8), torch.randn(5, 6)
    with torch.no_grad():
        full, _ = clf(regions, phrases)
        codes = clf.encode_phrases(phrases)
        assert codes.shape[0] == 5
        torch.testing.assert_close(clf.score_encoded(regions, codes), full, rtol=1e-5, atol=1e-5)
        index = torch.tensor([[6, 0, 3], [1, 1, 2], [0, 5, 4], [2, 3, 6], [4, 4, 4]])
        picked = clf.score_encoded(regions, codes, index)
    assert picked.shape == (5, 3)
    torch.testing.assert_close(picked, full.gather(1, index), rtol=1e-5, atol=1e-5)


def test_cca_classifier_keeps_its_projection_when_a_checkpoint_lacks_it():
    (p1, _), x, table = _two_layer_cca()
    clf = CCAClassifier(None, 8, 6)
    clf.load_projection(p1)
    result = clf.load_state_dict({}, strict=False)  # e.g. a checkpoint trained without the cascade's shortlist
    assert "scale_0" in result.missing_keys
    logits, _ = clf(torch.tensor(x[:3], dtype=torch.float32), torch.tensor(table[:2], dtype=torch.float32))
    assert logits.shape == (2, 3)
