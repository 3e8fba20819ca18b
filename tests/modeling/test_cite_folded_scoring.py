"""CITE's folded inference scorer (issue 13) equals the BatchNorm path: hand-folded Linear + BN,
random and CCA-initialized classifiers with non-trivial running statistics, the cascade's region
index, chunking, autograd, and training mode left on the BatchNorm path."""
import numpy as np
import pytest
import torch
from torch import nn

from phrasedet.modeling.classifiers import CITEClassifier
from phrasedet.modeling.classifiers.cite_inference import DEFAULT_MAX_ROWS, fold_cite, fold_linear_bn, score_folded
from tests.modeling.test_classifiers import _two_layer_cca


def _randomize_batch_norms(clf, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in clf.modules():
            if isinstance(m, nn.BatchNorm1d):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=g))
                m.running_var.copy_(torch.rand(n, generator=g) * 1.5 + 0.5)
                m.weight.copy_(torch.randn(n, generator=g))
                m.bias.copy_(torch.randn(n, generator=g))
    return clf


def _cite(region_dim=9, phrase_dim=7, **sizes):
    torch.manual_seed(0)
    opts = dict(hidden_dim=10, embed_dim=6, joint_dim=8, concept_dim=5, num_concepts=3)
    opts.update(sizes)
    clf = _randomize_batch_norms(CITEClassifier(None, region_dim, phrase_dim, **opts)).eval()
    with torch.no_grad():
        clf.score.weight.mul_(20.0)  # logits that vary by more than the tolerance across pairs
    return clf


def _reference(clf, regions, codes, region_index=None):
    """The unfolded path: e_p * e_r through Linear -> BatchNorm (running statistics) -> ReLU."""
    phrases, weights = codes.split([codes.shape[1] - len(clf.concepts), len(clf.concepts)], dim=1)
    e_r = clf.embed_regions(regions)
    paired = e_r[None] if region_index is None else e_r[region_index]
    return clf._score_products(phrases[:, None, :] * paired, weights)


def test_one_linear_and_batch_norm_fold_by_hand():
    lin, bn = nn.Linear(2, 2), nn.BatchNorm1d(2, eps=0.0).eval()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, 2.0], [3.0, -1.0]]))
        lin.bias.copy_(torch.tensor([0.5, -1.0]))
        bn.running_mean.copy_(torch.tensor([1.0, 2.0]))
        bn.running_var.copy_(torch.tensor([4.0, 0.25]))
        bn.weight.copy_(torch.tensor([2.0, 3.0]))
        bn.bias.copy_(torch.tensor([1.0, 0.0]))
    weight, bias = fold_linear_bn(lin, bn)
    # unit 0: s = 2 / sqrt(4) = 1  -> W row [1, 2], b = (0.5 - 1) * 1 + 1 = 0.5
    # unit 1: s = 3 / sqrt(0.25) = 6 -> W row [18, -6], b = (-1 - 2) * 6 + 0 = -18
    torch.testing.assert_close(weight, torch.tensor([[1.0, 18.0], [2.0, -6.0]]))
    torch.testing.assert_close(bias, torch.tensor([0.5, -18.0]))
    x = torch.tensor([[1.0, 1.0], [0.0, -2.0]])
    torch.testing.assert_close(x @ weight + bias, bn(lin(x)))
    torch.testing.assert_close(x @ weight + bias, torch.tensor([[3.5, -6.0], [-3.5, -6.0]]))


def test_fold_without_affine_and_without_running_statistics():
    lin = nn.Linear(3, 4)
    bn = nn.BatchNorm1d(4, affine=False).eval()
    with torch.no_grad():
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
    weight, bias = fold_linear_bn(lin, bn)
    x = torch.randn(5, 3)
    torch.testing.assert_close(x @ weight + bias, bn(lin(x)).detach(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="track_running_stats=False"):
        fold_linear_bn(lin, nn.BatchNorm1d(4, track_running_stats=False))


@pytest.mark.parametrize("cca", [False, True])
def test_folded_scores_equal_the_batch_norm_path_for_all_regions_and_a_region_index(cca):
    clf = _cite(8, 6) if cca else _cite()
    if cca:
        projs, x, table = _two_layer_cca()
        clf.init_from_cca(projs)  # E becomes 3; a new joint layer: randomize its statistics too
        _randomize_batch_norms(clf, seed=1).eval()
        regions, phrases = torch.tensor(x[:11], dtype=torch.float32), torch.tensor(table[:5], dtype=torch.float32)
        with torch.no_grad():  # CCA layers start with b = 0; move off the exact CCA
            for p in list(clf.region_branch.parameters()) + list(clf.phrase_branch.parameters()):
                p.add_(0.05 * torch.randn_like(p))
    else:
        regions, phrases = torch.randn(11, 9), torch.randn(5, 7)
    with torch.no_grad():
        codes = clf.encode_phrases(phrases)
        ref = _reference(clf, regions, codes)
        folded = clf.score_encoded(regions, codes)
        index = torch.randint(0, 11, (5, 4), generator=torch.Generator().manual_seed(3))
        picked = clf.score_encoded(regions, codes, index)
        full_forward, _ = clf(regions, phrases)
    assert ref.std() > 0.05  # BN statistics make a difference: the scores are not all equal
    torch.testing.assert_close(folded, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(picked, _reference(clf, regions, codes, index).detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(picked, ref.gather(1, index), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(full_forward, ref, rtol=1e-5, atol=1e-5)


def test_eval_mode_uses_the_folded_path_and_training_the_batch_norm_path(monkeypatch):
    clf = _cite()
    regions, phrases = torch.randn(6, 9), torch.randn(4, 7)
    calls = []
    original = CITEClassifier._score_products
    monkeypatch.setattr(CITEClassifier, "_score_products", lambda self, *a: calls.append(1) or original(self, *a))
    with torch.no_grad():
        codes = clf.encode_phrases(phrases)
        clf.score_encoded(regions, codes)
        clf(regions, phrases)
    assert calls == []
    clf.train()
    before = clf.joint.bn.running_mean.clone()
    logits, _ = clf(regions, phrases)
    assert calls == [1]
    assert not torch.equal(clf.joint.bn.running_mean, before)  # batch statistics: running stats updated
    clf.eval()
    with torch.no_grad():
        assert not torch.allclose(clf(regions, phrases)[0], logits)  # running vs batch statistics


def test_chunks_of_pairs_give_the_same_scores():
    clf = _cite()
    regions, phrases = torch.randn(13, 9), torch.randn(9, 7)
    index = torch.randint(0, 13, (9, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        codes = clf.encode_phrases(phrases)
        e_p, w = codes.split([codes.shape[1] - 3, 3], dim=1)
        e_r = clf.embed_regions(regions)
        folded = fold_cite(clf.joint, clf.concepts, clf.score)
        whole = score_folded(folded, e_p, w, e_r, max_rows=10**6)
        whole_index = score_folded(folded, e_p, w, e_r, index, max_rows=10**6)
        for rows in (1, 13, 27, 40):  # fewer rows than one phrase's regions, one phrase, 2 and a rest, 3
            torch.testing.assert_close(score_folded(folded, e_p, w, e_r, max_rows=rows), whole, rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(score_folded(folded, e_p, w, e_r, index, max_rows=rows), whole_index, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(whole, _reference(clf, regions, codes), rtol=1e-5, atol=1e-5)
    assert score_folded(folded, e_p[:0], w[:0], e_r).shape == (0, 13)
    assert score_folded(folded, e_p, w, e_r[:0]).shape == (9, 0)


def test_default_chunking_on_more_pairs_than_one_chunk():
    clf = _cite(joint_dim=4, concept_dim=2, num_concepts=2)
    regions, phrases = torch.randn(70, 9), torch.randn(75, 7)  # 5,250 pairs > DEFAULT_MAX_ROWS
    assert 70 * 75 > DEFAULT_MAX_ROWS
    with torch.no_grad():
        codes = clf.encode_phrases(phrases)
        torch.testing.assert_close(clf.score_encoded(regions, codes), _reference(clf, regions, codes), rtol=1e-5, atol=1e-5)


def test_eval_scores_stay_differentiable_and_follow_parameter_changes():
    clf = _cite()
    regions, phrases = torch.randn(5, 9), torch.randn(3, 7)
    logits, _ = clf(regions, phrases)
    logits.sum().backward()
    assert clf.joint.fc.weight.grad is not None and clf.joint.fc.weight.grad.abs().sum() > 0
    assert clf.joint.bn.weight.grad.abs().sum() > 0
    with torch.no_grad():  # folded weights come from the current parameters: no stale cache
        clf.joint.bn.running_mean.add_(1.0)
        clf.score.bias.add_(2.0)
        codes = clf.encode_phrases(phrases)
        np.testing.assert_allclose(clf.score_encoded(regions, codes).numpy(), _reference(clf, regions, codes).numpy(), rtol=1e-5, atol=1e-5)
