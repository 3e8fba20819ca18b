"""CCA-initialized layers: exact CCA projection before training, bias scaling, Eq. 5 regularizer."""
import numpy as np
import pytest
import torch

from phrasedet.modeling.cca import PhraseGroupedMoments, fit_cca
from phrasedet.modeling.cca.layers import CCAInitLinear


def _fitted(seed=0, n=200, dx=6, dy=5, vocab=20, k=4):
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((vocab, dy))
    ids = rng.integers(0, vocab, n)
    x = table[ids] @ rng.standard_normal((dy, dx)) + 0.5 * rng.standard_normal((n, dx)) + 3.0
    m = PhraseGroupedMoments(dx, vocab)
    m.add(x, ids)
    return fit_cca(m, table, dim=k), x, table


def test_from_projection_reproduces_the_cca_projection():
    proj, x, table = _fitted()
    region = CCAInitLinear.from_projection(proj.mean_x, proj.A, proj.scale)
    phrase = CCAInitLinear.from_projection(proj.mean_y, proj.B, proj.scale)
    with torch.no_grad():
        got_x = region(torch.tensor(x, dtype=torch.float32)).numpy()
        got_y = phrase(torch.tensor(table, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(got_x, proj.project_regions(x), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_y, proj.project_phrases(table), rtol=1e-4, atol=1e-4)
    # mu and sigma frozen buffers; W and b trained
    assert {n for n, _ in region.named_parameters()} == {"weight", "bias"}
    assert {"mean", "scale", "weight_init"} <= {n for n, _ in region.named_buffers()}


def test_scale_applies_after_the_bias_in_the_code_variant_and_before_in_the_paper_variant():
    mean, weight, scale = [1.0, 2.0], [[1.0, 0.0, 1.0], [0.0, 2.0, 1.0]], [2.0, 3.0, 0.5]
    code = CCAInitLinear(mean, weight, scale, scale_bias=True)
    paper = CCAInitLinear(mean, weight, scale, scale_bias=False)
    with torch.no_grad():
        for layer in (code, paper):
            layer.bias.copy_(torch.tensor([1.0, -1.0, 2.0]))
        x = torch.tensor([[2.0, 4.0]])  # x - mu = [1, 2]; (x - mu) W = [1, 4, 3]
        assert torch.allclose(code(x), torch.tensor([[(1 + 1) * 2.0, (4 - 1) * 3.0, (3 + 2) * 0.5]]))
        assert torch.allclose(paper(x), torch.tensor([[1 * 2.0 + 1, 4 * 3.0 - 1, 3 * 0.5 + 2]]))


def test_random_layer_is_plain_linear():
    torch.manual_seed(0)
    layer = CCAInitLinear.random(4, 3)
    assert not layer.cca_initialized
    assert torch.equal(layer.mean, torch.zeros(4)) and torch.equal(layer.scale, torch.ones(3))
    assert torch.equal(layer.bias.detach(), torch.zeros(3))
    x = torch.randn(5, 4)
    assert torch.allclose(layer(x), x @ layer.weight)


def test_regularizer_is_zero_at_init_and_has_the_hand_gradient():
    w0 = torch.tensor([[1.0, -2.0], [0.5, 0.0]])
    layer = CCAInitLinear(torch.zeros(2), w0, torch.ones(2))
    lam, beta = 0.1, 0.01
    assert layer.regularizer(lam, beta).item() == 0.0
    with torch.no_grad():
        layer.weight.add_(torch.tensor([[0.2, 0.0], [-0.4, 1.0]]))
        layer.bias.copy_(torch.tensor([0.5, -0.25]))
    reg = layer.regularizer(lam, beta)
    # 0.5 * 0.1 * (0.04 + 0.16 + 1.0) + 0.01 * (0.5 + 0.25) = 0.06 + 0.0075
    assert abs(reg.item() - 0.0675) < 1e-7
    reg.backward()
    assert torch.allclose(layer.weight.grad, torch.tensor([[0.02, 0.0], [-0.04, 0.1]]))  # lam * (W - W0)
    assert torch.allclose(layer.bias.grad, torch.tensor([0.01, -0.01]))  # beta * sign(b)


@pytest.mark.parametrize("build, kwargs, expected", [
    # the documented defaults: the released code's bias scaling; a layer given W is CCA-initialized
    (lambda **kw: CCAInitLinear([0.0, 0.0], np.ones((2, 3)), np.ones(3), **kw), {},
     "in=2, out=3, scale_bias=True, cca_initialized=True"),
    (lambda **kw: CCAInitLinear([0.0, 0.0], np.ones((2, 3)), np.ones(3), **kw), {"scale_bias": False, "cca_initialized": False},
     "in=2, out=3, scale_bias=False, cca_initialized=False"),
    (lambda **kw: CCAInitLinear.from_projection(np.zeros(2), np.ones((2, 3)), np.ones(3), **kw), {},
     "in=2, out=3, scale_bias=True, cca_initialized=True"),
    (lambda **kw: CCAInitLinear.from_projection(np.zeros(2), np.ones((2, 3)), np.ones(3), **kw), {"scale_bias": True},
     "in=2, out=3, scale_bias=True, cca_initialized=True"),
    (lambda **kw: CCAInitLinear.from_projection(np.zeros(2), np.ones((2, 3)), np.ones(3), **kw), {"scale_bias": False},
     "in=2, out=3, scale_bias=False, cca_initialized=True"),
    (lambda **kw: CCAInitLinear.random(2, 3, **kw), {}, "in=2, out=3, scale_bias=True, cca_initialized=False"),
    (lambda **kw: CCAInitLinear.random(2, 3, **kw), {"scale_bias": True}, "in=2, out=3, scale_bias=True, cca_initialized=False"),
    (lambda **kw: CCAInitLinear.random(2, 3, **kw), {"scale_bias": False}, "in=2, out=3, scale_bias=False, cca_initialized=False"),
], ids=["init-defaults", "init-given", "projection-default", "projection-code", "projection-paper", "random-default",
        "random-code", "random-paper"])
def test_layer_kind_and_bias_scaling_by_constructor(build, kwargs, expected):
    layer = build(**kwargs)
    assert layer.extra_repr() == expected
    assert layer.cca_initialized is expected.endswith("cca_initialized=True")


@pytest.mark.parametrize("scale_bias, expected", [(True, [[(4 + 1) * 2.0]]), (False, [[4 * 2.0 + 1]])])
def test_from_projection_passes_the_bias_scaling_on(scale_bias, expected):
    # x - mu = 2, W = 2, sigma = 2, b = 1: code (2 * 2 + 1) * 2 = 10, paper 2 * 2 * 2 + 1 = 9
    layer = CCAInitLinear.from_projection([1.0], [[2.0]], [2.0], scale_bias=scale_bias)
    with torch.no_grad():
        layer.bias.fill_(1.0)
        assert layer(torch.tensor([[3.0]])).tolist() == expected


def test_the_cca_flag_is_restored_from_a_checkpoint():
    cca, plain = CCAInitLinear([0.0], [[1.0]], [1.0]), CCAInitLinear.random(1, 1)
    plain.load_state_dict(cca.state_dict())
    assert plain.cca_initialized is True


def test_random_weights_are_uniform_within_one_over_sqrt_of_the_input_size():
    torch.manual_seed(0)
    w = CCAInitLinear.random(4, 500).weight.detach()  # bound 1 / sqrt(4) = 0.5; 2,000 draws
    assert w.min().item() >= -0.5 and w.max().item() <= 0.5
    assert w.min().item() < -0.45 and w.max().item() > 0.45


def test_regularizer_defaults_are_the_released_codes():
    # l2_weight 5e-5 on 0.5 ||W - W0||^2 = 0.5 * (0.04 + 0.16 + 1.0): 3e-5; no L1 on the bias by default
    layer = CCAInitLinear(torch.zeros(2), torch.zeros(2, 2), torch.ones(2))
    with torch.no_grad():
        layer.weight.add_(torch.tensor([[0.2, 0.0], [-0.4, 1.0]]))
        layer.bias.copy_(torch.tensor([0.5, -0.25]))
    assert layer.regularizer().item() == pytest.approx(3e-5, rel=1e-6)


@pytest.mark.parametrize("mean, weight, scale, message", [
    ([0.0], [1.0, 2.0], [1.0], "weight must be [D_in, D_out], got (2,)"),
    ([0.0, 0.0, 0.0], np.ones((2, 3)), np.ones(3), "mean (3,) / scale (3,) do not match weight [2, 3]"),
    ([0.0, 0.0], np.ones((2, 3)), np.ones(2), "mean (2,) / scale (2,) do not match weight [2, 3]"),
])
def test_mismatched_shapes_are_named(mean, weight, scale, message):
    with pytest.raises(ValueError) as e:
        CCAInitLinear(mean, weight, scale)
    assert str(e.value) == message


def test_inputs_may_be_trained_tensors_or_array_likes_and_are_copied():
    """A parameter (requires grad) is detached and copied; a list of row tensors is read as numpy reads it."""
    source = torch.nn.Parameter(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    layer = CCAInitLinear(torch.zeros(2), source, torch.ones(2))
    with torch.no_grad():
        source.mul_(10)
    assert layer.weight.tolist() == layer.weight_init.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    rows = CCAInitLinear([0.0, 0.0], [torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])], [1.0, 1.0])
    assert rows.weight.tolist() == [[1.0, 2.0], [3.0, 4.0]]
