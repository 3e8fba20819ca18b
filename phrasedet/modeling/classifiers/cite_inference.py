"""CITE's scoring at inference with its BatchNorms folded away (issue 13).

In eval mode CITE's joint and concept layers are Linear -> BatchNorm (running statistics) ->
ReLU. A BatchNorm with fixed statistics is an affine map per output unit,

    bn(z) = (z - mu) * s + beta,    s = gamma / sqrt(var + eps),

so Linear(x) = x W^T + b followed by it equals one linear layer with weight ``W * s[:, None]``
and bias ``(b - mu) * s + beta`` (:func:`fold_linear_bn`): exact up to float rounding. The K
concept layers read the same input, so their folded weights stack into one [J, K * C] layer.
The last two steps of CITE,

    logit(p, r) = sum_c u_c * sum_k w_pk * relu(g_k)(p, r)_c + b_u     (u = FC(C -> 1), w = softmax)
                = sum_{k, c} relu(G)(p, r, k, c) * (w_pk * u_c) + b_u,

are one mat-vec per phrase with the vector v_p = (w_pk * u_c)_{k, c} [K * C]: the weighted mixture
[P, R, C] is never formed. Per chunk of pairs the scorer then does

    x = e_p * e_r [n, E] -> relu(x W_j + b_j) [n, J] -> relu(. W_c + b_c) [n, K * C] -> . v_p [n]

i.e. two large matrix products and a batched mat-vec, in two reused work buffers of
``max_rows`` rows (e_p * e_r then joint FC as one [n, E] @ [E, J] product is faster than the
per-phrase ``e_r @ (e_p[:, None] * W_j)`` batched product, which writes an [E, J] matrix per phrase
instead of an [R, E] one).
"""
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["FoldedCITE", "fold_linear_bn", "fold_cite", "score_folded", "DEFAULT_MAX_ROWS"]

# (phrase, region) pairs per chunk: 4096 rows x 1024 floats = 16 MB per work buffer at the paper's sizes
DEFAULT_MAX_ROWS = 4096


def fold_linear_bn(linear: nn.Linear, bn: nn.BatchNorm1d):
    """bn(linear(x)) with bn's running statistics as one affine map: (weight [in, out], bias [out]),
    so that ``x @ weight + bias`` equals ``bn(linear(x))`` in eval mode."""
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError(f"cannot fold {bn}: it keeps no running statistics (track_running_stats=False)")
    scale = torch.rsqrt(bn.running_var + bn.eps)
    shift = -bn.running_mean * scale
    if bn.affine:
        scale, shift = scale * bn.weight, shift * bn.weight + bn.bias
    bias = linear.bias * scale + shift if linear.bias is not None else shift
    return (linear.weight * scale[:, None]).t(), bias


@dataclass
class FoldedCITE:
    """CITE's pair layers folded (module docstring): joint [E, J] + [J], concepts [J, K * C] + [K * C],
    the final FC's weight u [C] and bias b_u (a 0-d tensor)."""

    joint_weight: torch.Tensor
    joint_bias: torch.Tensor
    concept_weight: torch.Tensor
    concept_bias: torch.Tensor
    score_weight: torch.Tensor
    score_bias: torch.Tensor

    def mixture(self, weights):
        """Softmaxed concept weights w [P, K] -> the per-phrase vectors v [P, K * C], v_p = (w_pk u_c)."""
        return (weights[:, :, None] * self.score_weight).reshape(weights.shape[0], -1)


def fold_cite(joint, concepts, score: nn.Linear) -> FoldedCITE:
    """Fold CITE's ``joint`` and ``concepts`` (modules with ``.fc`` and ``.bn``) and ``score``
    from their current parameters (cheap: O(E J + J K C))."""
    wj, bj = fold_linear_bn(joint.fc, joint.bn)
    folded = [fold_linear_bn(c.fc, c.bn) for c in concepts]
    return FoldedCITE(wj, bj, torch.cat([w for w, _ in folded], dim=1), torch.cat([b for _, b in folded]),
                      score.weight.reshape(-1), score.bias.reshape(()))


def score_folded(folded: FoldedCITE, phrases, weights, regions, region_index=None, max_rows: int = DEFAULT_MAX_ROWS):
    """CITE logits from the folded layers.

    Args:
        phrases: e_p [P, E]; weights: softmaxed concept weights [P, K]; regions: e_r [R, E];
        region_index: None (every region) or [P, k] long (region ``region_index[p, j]`` for phrase p);
        max_rows: pairs per chunk (at least one phrase's regions): bounds the work buffers to
            ``max_rows * max(E, J, K * C)`` floats each, whatever P.

    Returns:
        [P, R] (or [P, k]).

    Without autograd the chunks write into two reused buffers; with it (a parameter or input
    requiring grad) each op allocates its output, so the result stays differentiable.
    """
    num_phrases = phrases.shape[0]
    per_phrase = regions.shape[0] if region_index is None else region_index.shape[1]
    if num_phrases == 0 or per_phrase == 0:
        return regions.new_zeros(num_phrases, per_phrase)
    step = max(1, max_rows // per_phrase)
    rows = min(step, num_phrases) * per_phrase
    dim_e, dim_j, dim_g = folded.joint_weight.shape[0], folded.joint_weight.shape[1], folded.concept_weight.shape[1]
    tensors = (phrases, weights, regions, folded.joint_weight, folded.concept_weight, folded.score_weight)
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    if grad:
        work_a = work_b = None
    else:
        work_a = regions.new_empty(rows * max(dim_e, dim_g))
        work_b = regions.new_empty(rows * dim_j)

    def buffer(work, n, dim):
        return None if work is None else work[: n * dim].view(n, dim)

    mixture = folded.mixture(weights)  # [P, K * C]
    out = []
    for start in range(0, num_phrases, step):
        e_p = phrases[start:start + step]
        b = e_p.shape[0]
        n = b * per_phrase
        x = buffer(work_a, n, dim_e)
        if region_index is None:
            x = torch.mul(e_p[:, None, :], regions[None], out=None if x is None else x.view(b, per_phrase, dim_e))
        else:
            x = torch.index_select(regions, 0, region_index[start:start + step].reshape(-1), out=x).view(b, per_phrase, dim_e)
            x = x.mul_(e_p[:, None, :])
        h = torch.addmm(folded.joint_bias, x.view(n, dim_e), folded.joint_weight, out=buffer(work_b, n, dim_j)).relu_()
        g = torch.addmm(folded.concept_bias, h, folded.concept_weight, out=buffer(work_a, n, dim_g)).relu_()
        out.append(torch.bmm(g.view(b, per_phrase, dim_g), mixture[start:start + step, :, None]).view(b, per_phrase))
    return torch.cat(out).add_(folded.score_bias)
