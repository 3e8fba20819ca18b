"""Embedding Network (Wang et al. two-branch network; paper 003 Sec. 3.3.4, released code variant).

Also holds what CITE shares with it: :func:`resolve_options` (constructor keyword arguments
overridden by an optional config node) and the CCA initialization of two
:class:`~phrasedet.modeling.two_branch.TwoLayerBranch` es.
"""

import torch
import torch.nn.functional as F
from torch import nn

from ..cca import CCAInitLinear
from ..losses import mean_topk
from ..two_branch import TwoLayerBranch
from .build import REGION_CLASSIFIER_REGISTRY, dot_scores

__all__ = ["EmbeddingNetClassifier", "resolve_options"]


def resolve_options(cfg, node_name: str, defaults: dict, overrides: dict) -> dict:
    """Constructor options: ``defaults``, then ``cfg.MODEL.PHRASE_ROI_HEADS.<node_name>.<KEY>`` where
    that node exists (keys are the upper-cased option names), then the explicit ``overrides``."""
    unknown = set(overrides) - set(defaults)
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; expected some of {sorted(defaults)}")
    opts = dict(defaults)
    heads = cfg.MODEL.PHRASE_ROI_HEADS if cfg is not None and "PHRASE_ROI_HEADS" in cfg.MODEL else None
    if heads is not None and node_name in heads:
        node = heads[node_name]
        for name in defaults:
            if name.upper() in node:
                value = node[name.upper()]
                opts[name] = tuple(value) if isinstance(value, list) else value
    opts.update(overrides)
    return opts


def _cca_sides(projection, layer: int):
    """(region side, phrase side) of a ``CCAProjection`` as (mean, matrix, scale) triples."""
    for name in ("mean_x", "mean_y", "A", "B", "scale"):
        if not hasattr(projection, name):
            raise TypeError(f"CCA projection of layer {layer} has no attribute {name!r}")
    return (projection.mean_x, projection.A, projection.scale), (projection.mean_y, projection.B, projection.scale)


class _TwoBranchMixin:
    """CCA initialization of ``self.region_branch`` / ``self.phrase_branch`` and their regularizer."""

    def init_from_cca(self, projections) -> None:
        """Initialize Region/Text Layers 1 and 2 from two fitted CCAs (paper 003 Sec. 4.1).

        Args:
            projections: [layer 1, layer 2] ``CCAProjection`` s. Layer 1 is fitted on the
                (region, phrase) features, layer 2 on the ReLU'd layer-1 projections of both
                views (``tools/compute_cca.py``). The region side (mean_x, A) initializes the
                region branch, the phrase side (mean_y, B) the phrase branch; both use ``scale``.

        The embedding size becomes layer 2's CCA dimension. A checkpoint of a CCA-initialized
        classifier loads after calling this with projections of the same sizes.
        """
        if len(projections) != 2:
            raise ValueError(f"expected CCA projections for 2 layers, got {len(projections)}")
        sb = self.options["scale_bias"]
        region_layers, phrase_layers = [], []
        for i, proj in enumerate(projections):
            region_side, phrase_side = _cca_sides(proj, i + 1)
            region_layers.append(CCAInitLinear.from_projection(*region_side, scale_bias=sb))
            phrase_layers.append(CCAInitLinear.from_projection(*phrase_side, scale_bias=sb))
        device = next(self.parameters()).device
        self.region_branch.set_layers([l.to(device) for l in region_layers])
        self.phrase_branch.set_layers([l.to(device) for l in phrase_layers])
        self._on_embed_dim(self.region_branch.out_features)

    def _on_embed_dim(self, dim: int) -> None:
        """Hook for layers that depend on the embedding size (CITE's joint layer)."""

    def _cca_regularizer(self):
        o = self.options
        terms = [b.regularizer(o["cca_l2_weight"], o["cca_l1_bias_weight"]) for b in (self.region_branch, self.phrase_branch)]
        terms = [t for t in terms if t is not None]
        return sum(terms) if terms else None

    def embed(self, region_feats, phrase_feats):
        """L2-normalized embeddings: regions [R, E], phrases [P, E]."""
        return self.embed_regions(region_feats), self.embed_phrases(phrase_feats)

    def embed_regions(self, region_feats):
        """[R, D_r] -> L2-normalized [R, E]."""
        return F.normalize(self.region_branch(region_feats), dim=-1)

    def embed_phrases(self, phrase_feats):
        """[P, D_t] -> L2-normalized [P, E]."""
        return F.normalize(self.phrase_branch(phrase_feats), dim=-1)


@REGION_CLASSIFIER_REGISTRY.register()
class EmbeddingNetClassifier(_TwoBranchMixin, nn.Module):
    """Two-branch embedding: score(p, r) = cos(g(t_p), f(r)), f and g two FC layers each.

    Options (constructor keywords; config node ``MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET``, keys
    upper-cased). Defaults are small for CPU; paper/code values in brackets:

        hidden_dim 256 [code: the region feature size, 2053], embed_dim 256 [1024];
        margin 0.05; topk_per_phrase 5 (average the top 5 * P violations);
        region_loss_weight 0.1, phrase_loss_weight 0.1 (neighbourhood terms);
        pos_iou 0.6, neg_iou 0.3; pool_phrases False (see below);
        cca_l2_weight 5e-5 (CCA_L2_REG), cca_l1_bias_weight 1e-4 (WEIGHT_DECAY);
        scale_bias True (sigma after the bias, as the code).

    Loss (``targets`` given; labels only on ``targets.sampled`` entries: positive IoU >= pos_iou,
    negative IoU < neg_iou; others ignored), with S = logits [P, R] (cosines):

    * ``loss_phrase_cls`` (cross-modal ranking): violations max(0, m + S[p, n] - S[p, q]) for every
      positive (p, q) and negative (p, n) of the same phrase p; the mean of the top 5 * P.
      ``pool_phrases=True`` pairs every positive with every negative of any phrase, as the
      released code's EMBED_SINGLE_CATEGORY path does.
    * ``loss_region_nbr`` (weight 0.1): regions positive for the same phrase are neighbours. For
      each phrase p, positives i != j and negative k: max(0, m + C[i, k] - C[i, j]), C the
      region-region cosines; the mean of the top 5 * P over the image. (The code's term is a
      loosely equivalent top-5-per-phrase over region-region cosines; this is the Wang et al.
      neighbourhood triplet written plainly.)
    * ``loss_phrase_nbr`` (weight 0.1): phrases sharing a positive region are neighbours. For each
      phrase p with a neighbour q != p and a non-neighbour n: the hardest violation
      max(0, m + T[p, n] - T[p, q]) (T phrase-phrase cosines), averaged over such phrases
      ("hardest violation only", as the code). Zero when no two phrases share a region.
    * ``loss_cca_reg``: the CCA-layer regularizer, only once :meth:`init_from_cca` was called.

    Memory: O(P * R) for the scores; the ranking terms are built one phrase at a time, O(#pos * #neg)
    and O(#pos^2 * #neg) for that phrase's sampled regions.
    """

    DEFAULTS = dict(
        hidden_dim=256,
        embed_dim=256,
        margin=0.05,
        topk_per_phrase=5,
        region_loss_weight=0.1,
        phrase_loss_weight=0.1,
        pos_iou=0.6,
        neg_iou=0.3,
        pool_phrases=False,
        cca_l2_weight=5e-5,
        cca_l1_bias_weight=1e-4,
        scale_bias=True,
    )

    def __init__(self, cfg, region_dim: int, phrase_dim: int, **overrides):
        super().__init__()
        self.options = o = resolve_options(cfg, "EMBEDDING_NET", self.DEFAULTS, overrides)
        self.region_branch = TwoLayerBranch(region_dim, o["hidden_dim"], o["embed_dim"], o["scale_bias"])
        self.phrase_branch = TwoLayerBranch(phrase_dim, o["hidden_dim"], o["embed_dim"], o["scale_bias"])

    def encode_phrases(self, phrase_feats):
        """[P, D_t] -> the phrase embeddings [P, E]."""
        return self.embed_phrases(phrase_feats)

    def score_encoded(self, region_feats, codes, region_index=None):
        """[R, D_r], codes [P, E] -> cosines [P, R] ([P, k] for ``region_index`` [P, k])."""
        return dot_scores(codes, self.embed_regions(region_feats), region_index)

    def forward(self, region_feats, phrase_feats, targets=None):
        """[R, D_r], [P, D_t] -> cosine logits [P, R] and the losses when ``targets`` is given."""
        regions, phrases = self.embed(region_feats, phrase_feats)
        logits = phrases @ regions.t()
        if targets is None:
            return logits, {}
        losses = self.losses(logits, regions, phrases, targets)
        reg = self._cca_regularizer()
        if reg is not None:
            losses["loss_cca_reg"] = reg
        return logits, losses

    def losses(self, logits, regions, phrases, targets) -> dict:
        """The three ranking terms (see the class docstring) from logits [P, R] and embeddings."""
        o = self.options
        m, num_phrases = o["margin"], logits.shape[0]
        k = o["topk_per_phrase"] * max(num_phrases, 1)
        zero = logits.sum() * 0.0
        pos = targets.sampled & (targets.iou >= o["pos_iou"])
        neg = targets.sampled & (targets.iou < o["neg_iou"])

        # cross-modal: violations of the same phrase (or all positives x all negatives)
        if o["pool_phrases"]:
            viol = (m + logits[neg][None, :] - logits[pos][:, None]).reshape(-1)
        else:
            viol = torch.cat([(m + logits[p, neg[p]][None, :] - logits[p, pos[p]][:, None]).reshape(-1) for p in range(num_phrases)] + [zero.reshape(1)[:0]])
        loss_cls = mean_topk(viol.clamp(min=0), k) if viol.numel() else zero

        # region neighbourhood: anchor i and neighbour j != i positives of p, n a negative of p
        loss_region = zero
        if o["region_loss_weight"]:
            cos_rr = regions @ regions.t()
            parts = []
            for p in range(num_phrases):
                pi, ni = pos[p].nonzero().flatten(), neg[p].nonzero().flatten()
                if len(pi) < 2 or len(ni) == 0:
                    continue
                c_pos, c_neg = cos_rr[pi][:, pi], cos_rr[pi][:, ni]  # [a, j], [a, n]
                v = m + c_neg[:, None, :] - c_pos[:, :, None]  # [a, j, n]
                off = ~torch.eye(len(pi), dtype=torch.bool, device=v.device)
                parts.append(v[off].reshape(-1))
            if parts:
                loss_region = mean_topk(torch.cat(parts).clamp(min=0), k)

        # phrase neighbourhood: phrases sharing a positive region
        loss_phrase = zero
        if o["phrase_loss_weight"] and num_phrases > 2:
            pf = pos.to(logits.dtype)
            nbr = (pf @ pf.t()) > 0
            eye = torch.eye(num_phrases, dtype=torch.bool, device=nbr.device)
            nbr_off, non = nbr & ~eye, ~nbr
            cos_pp = phrases @ phrases.t()
            valid = nbr_off[:, :, None] & non[:, None, :]  # [p, q, n]
            if valid.any():
                v = (m + cos_pp[:, None, :] - cos_pp[:, :, None]).clamp(min=0)
                v = v.masked_fill(~valid, float("-inf")).flatten(1).max(dim=1).values
                has = valid.flatten(1).any(dim=1)
                loss_phrase = v[has].mean()

        return {
            "loss_phrase_cls": loss_cls,
            "loss_region_nbr": o["region_loss_weight"] * loss_region,
            "loss_phrase_nbr": o["phrase_loss_weight"] * loss_phrase,
        }
