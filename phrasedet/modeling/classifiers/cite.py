"""CITE, Conditional Image-Text Embedding (Plummer et al. ECCV'18; paper 003 Sec. 3.3.5)."""
import torch
import torch.nn.functional as F
from torch import nn

from .build import REGION_CLASSIFIER_REGISTRY
from .cite_inference import fold_cite, score_folded
from ..two_branch import TwoLayerBranch
from .embedding_net import _TwoBranchMixin, resolve_options

__all__ = ["CITEClassifier"]


def _batch_norm(bn: nn.BatchNorm1d, x):
    """``bn`` on [N, C]; a single training sample is normalized with the running statistics
    (batch statistics of one sample are undefined) without updating them."""
    if bn.training and x.shape[0] == 1:
        return F.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0, bn.eps)
    return bn(x)


class _FCBNReLU(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.fc = nn.Linear(in_dim, out_dim)
        self.bn = nn.BatchNorm1d(out_dim, momentum=0.01)  # TF decay 0.99

    def forward(self, x):
        return F.relu(_batch_norm(self.bn, self.fc(x)))


@REGION_CLASSIFIER_REGISTRY.register()
class CITEClassifier(_TwoBranchMixin, nn.Module):
    """logit(p, r) = w . sum_k softmax(a_p)_k * g_k(h(e_p * e_r)) + c.

    * e_r = L2norm(region branch(r)), e_p = L2norm(phrase branch(t_p)): two FC layers each with a
      ReLU between (optionally CCA-initialized, :meth:`init_from_cca`), normalized per region and
      per phrase (the code's ``region_norm_axis=2``). As the in-network code, no BN in the
      branches (the external CITE code's non-CCA branch is FC+BN+ReLU -> FC).
    * h = FC(E -> J) + BN + ReLU on the element-wise product; g_k = FC(J -> C) + BN + ReLU for the
      K concepts; the final FC(C -> 1) gives the logit.
    * concept weights from the raw phrase feature: a_p = FC(H -> K)(ReLU(BN(FC(D_t -> H)(t_p)))),
      softmax over K. (The released in-network code feeds the pre-BN FC output to FC(H -> K),
      an apparent bug; the paper and the external CITE code use FC+BN+ReLU.)

    Options (constructor keywords; config node ``MODEL.PHRASE_ROI_HEADS.CITE``, keys upper-cased),
    small defaults for CPU with paper/code values in brackets: hidden_dim 256 [2053; also the
    concept-weight branch's hidden size], embed_dim 256 [1024], joint_dim 256 [1024], concept_dim
    64 [256], num_concepts 4 [4], pos_iou 0.6, neg_iou 0.3, neg_iou_fallback 0.4,
    neg_to_pos_ratio 2, concept_l1_weight 5e-5, cca_l2_weight 5e-5, cca_l1_bias_weight 0.0 (the
    external CITE code has no L1 on the CCA biases), scale_bias True.

    Loss (``targets`` given), only among ``targets.sampled`` entries, per phrase: positives IoU >=
    pos_iou; ``neg_to_pos_ratio`` x #positives negatives drawn at random among IoU < neg_iou, or
    among IoU < neg_iou_fallback when there are too few (if the image has no positive at all, one
    negative is drawn, as the code "always samples at least one negative"). ``loss_phrase_cls`` is
    the logistic loss log(1 + exp(-l c)) averaged over the labelled pairs; ``loss_concept_l1`` =
    concept_l1_weight * sum |a| / P; ``loss_cca_reg`` the CCA-layer regularizer once CCA-initialized.

    Inference (eval mode): the BatchNorms are folded into their linear layers, the K concept
    layers run as one product and the final FC and concept weights as one mat-vec per phrase
    (:mod:`.cite_inference`; equal to the BatchNorm path up to float rounding); the pairs are scored
    in chunks of ``cite_inference.DEFAULT_MAX_ROWS``, so memory is O(P * R) for the logits plus
    two bounded work buffers, whatever the phrase batch.

    Memory in training: the pair tensors are [P * R, max(E, J, C)] (concepts are accumulated one
    at a time), i.e. O(P * R * E); the ROI heads bound it at inference by scoring phrases in
    batches (TEST_PHRASE_BATCH; the code scores 650 phrases at a time for CITE).
    """

    DEFAULTS = dict(
        hidden_dim=256,
        embed_dim=256,
        joint_dim=256,
        concept_dim=64,
        num_concepts=4,
        pos_iou=0.6,
        neg_iou=0.3,
        neg_iou_fallback=0.4,
        neg_to_pos_ratio=2,
        concept_l1_weight=5e-5,
        cca_l2_weight=5e-5,
        cca_l1_bias_weight=0.0,
        scale_bias=True,
    )

    def __init__(self, cfg, region_dim: int, phrase_dim: int, **overrides):
        super().__init__()
        self.options = o = resolve_options(cfg, "CITE", self.DEFAULTS, overrides)
        self.region_branch = TwoLayerBranch(region_dim, o["hidden_dim"], o["embed_dim"], o["scale_bias"])
        self.phrase_branch = TwoLayerBranch(phrase_dim, o["hidden_dim"], o["embed_dim"], o["scale_bias"])
        self.joint = _FCBNReLU(o["embed_dim"], o["joint_dim"])
        self.concepts = nn.ModuleList([_FCBNReLU(o["joint_dim"], o["concept_dim"]) for _ in range(o["num_concepts"])])
        self.score = nn.Linear(o["concept_dim"], 1)
        self.concept_hidden = _FCBNReLU(phrase_dim, o["hidden_dim"])
        self.concept_logits = nn.Linear(o["hidden_dim"], o["num_concepts"])

    def _on_embed_dim(self, dim: int) -> None:
        if dim != self.joint.fc.in_features:  # the CCA changed E: a new (random) joint layer
            self.joint = _FCBNReLU(dim, self.options["joint_dim"]).to(self.score.weight.device)

    def encode_phrases(self, phrase_feats):
        """[P, D_t] -> codes [P, E + K]: the phrase embedding e_p and the softmaxed concept weights."""
        return torch.cat([self.embed_phrases(phrase_feats), self._concept_logits(phrase_feats).softmax(dim=1)], dim=1)

    def score_encoded(self, region_feats, codes, region_index=None):
        """[R, D_r], codes [P, E + K] -> logits [P, R] ([P, k] for ``region_index`` [P, k])."""
        phrases, weights = codes.split([codes.shape[1] - len(self.concepts), len(self.concepts)], dim=1)
        return self._score(self.embed_regions(region_feats), phrases, weights, region_index)

    def _score(self, regions, phrases, weights, region_index=None):
        """e_r [R, E], e_p [P, E], softmaxed weights [P, K] -> logits [P, R] ([P, k] for
        ``region_index`` [P, k]): the BatchNorm path in training, the folded one in eval mode."""
        if not self.training:
            folded = fold_cite(self.joint, self.concepts, self.score)  # from the current parameters
            return score_folded(folded, phrases, weights, regions, region_index)
        paired = regions[None, :, :] if region_index is None else regions[region_index]  # [1 or P, N, E]
        return self._score_products(phrases[:, None, :] * paired, weights)

    def _concept_logits(self, phrase_feats):
        """[P, D_t] -> pre-softmax concept weights a [P, K]."""
        return self.concept_logits(self.concept_hidden(phrase_feats))

    def _score_products(self, products, weights):
        """products e_p * e_r [P, N, E], weights [P, K] -> logits [P, N] through the BatchNorm
        layers (batch statistics in training; the reference of the folded path in eval mode)."""
        num_phrases, num_regions = products.shape[:2]
        joint = self.joint(products.reshape(num_phrases * num_regions, -1))
        mixed = 0
        for k, concept in enumerate(self.concepts):
            mixed = mixed + concept(joint).reshape(num_phrases, num_regions, -1) * weights[:, k, None, None]
        return self.score(mixed).squeeze(-1)

    def forward(self, region_feats, phrase_feats, targets=None):
        """[R, D_r], [P, D_t] -> logits [P, R] and the losses when ``targets`` is given."""
        num_phrases, num_regions = phrase_feats.shape[0], region_feats.shape[0]
        if num_phrases == 0 or num_regions == 0:  # nothing to score; keep the graph
            logits = region_feats.new_zeros(num_phrases, num_regions) + 0.0 * sum(p.sum() for p in self.parameters())
            return logits, ({} if targets is None else {"loss_phrase_cls": logits.sum() * 0.0})
        regions, phrases = self.embed(region_feats, phrase_feats)
        a = self._concept_logits(phrase_feats)  # [P, K] pre-softmax
        logits = self._score(regions, phrases, a.softmax(dim=1))
        if targets is None:
            return logits, {}
        losses = self.losses(logits, a, targets)
        reg = self._cca_regularizer()
        if reg is not None:
            losses["loss_cca_reg"] = reg
        return logits, losses

    def sample_labels(self, targets) -> torch.Tensor:
        """[P, R] int8: +1 positive, -1 sampled negative, 0 unlabelled (see the class docstring)."""
        o = self.options
        iou, sampled = targets.iou, targets.sampled
        labels = torch.zeros(iou.shape, dtype=torch.int8, device=iou.device)
        pos = sampled & (iou >= o["pos_iou"])
        labels[pos] = 1
        for p in range(iou.shape[0]):
            need = int(o["neg_to_pos_ratio"] * int(pos[p].sum()))
            if need:
                self._draw_negatives(labels, p, iou[p], sampled[p], need)
        if not pos.any() and sampled.any():  # at least one negative in the image
            for p in torch.randperm(iou.shape[0]).tolist():
                if self._draw_negatives(labels, p, iou[p], sampled[p], 1):
                    break
        return labels

    def _draw_negatives(self, labels, p, iou, sampled, need) -> int:
        o = self.options
        cand = (sampled & (iou < o["neg_iou"])).nonzero().flatten()
        if len(cand) < need:
            cand = (sampled & (iou < o["neg_iou_fallback"])).nonzero().flatten()
        chosen = cand[torch.randperm(len(cand), device=cand.device)[:need]]
        labels[p, chosen] = -1
        return len(chosen)

    def losses(self, logits, concept_logits, targets) -> dict:
        """Logistic loss over the sampled labelled pairs + the L1 on the pre-softmax concept weights."""
        labels = self.sample_labels(targets)
        labelled = labels != 0
        num_phrases = max(logits.shape[0], 1)
        l1 = self.options["concept_l1_weight"] * concept_logits.abs().sum() / num_phrases
        if not labelled.any():
            return {"loss_phrase_cls": logits.sum() * 0.0, "loss_concept_l1": l1}
        signs = labels[labelled].to(logits.dtype)
        return {"loss_phrase_cls": F.softplus(-signs * logits[labelled]).mean(), "loss_concept_l1": l1}
