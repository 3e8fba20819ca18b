"""``PhraseROIHeads``: phrase-conditioned ROI heads (paper 003 Sec. 3).

Training, per image with P phrases: sample regions per phrase from the shared proposals,
compute each sampled region's feature once, score every (phrase, region) pair with the region
classifier and regress the foreground pairs' boxes with the phrase-conditioned regressor. With
negative phrase augmentation, an image's last K phrase features are hard negatives, each drawn for
one of its P phrases (``negative_sources``): scored negative on that phrase's sampled foreground
regions only (:mod:`.negative_phrases`).

Inference: every phrase asked about (an image's own phrases, or a whole vocabulary in batches
of ``TEST_PHRASE_BATCH``) keeps its top-K regions by score; their boxes are refined by that
phrase's regression and clipped to the image. Memory grows with the batch, not the vocabulary.

Cascade (``CASCADE_TOPK`` = k > 0): the cheap CCA cosine (``self.shortlist``, a
:class:`CCAClassifier`) ranks every region for every phrase, and the classifier scores only each
phrase's k best; the top-K come from those. With k >= the number of regions it is full scoring.
"""
import torch
from detectron2.config import configurable
from detectron2.layers import cat
from detectron2.modeling.box_regression import Box2BoxTransform
from detectron2.modeling.proposal_generator.proposal_utils import add_ground_truth_to_proposals
from detectron2.modeling.roi_heads import ROI_HEADS_REGISTRY
from fvcore.nn import smooth_l1_loss
from torch import nn

from ..classifiers import CCAClassifier, PhraseTargets, build_region_classifier
from .negative_phrases import append_negative_targets
from .phrase_box_regression import PhraseBoxRegressor
from .phrase_sampling import phrase_iou, sample_regions_per_phrase
from .region_features import RegionFeatureExtractor

__all__ = ["PhraseROIHeads"]


@ROI_HEADS_REGISTRY.register()
class PhraseROIHeads(nn.Module):
    @configurable
    def __init__(
        self,
        *,
        region_features: RegionFeatureExtractor,
        classifier: nn.Module,
        box_regressor: PhraseBoxRegressor,
        box2box_transform: Box2BoxTransform,
        rois_per_phrase: int,
        positive_fraction: float,
        fg_threshold: float,
        smooth_l1_beta: float = 1.0,
        test_topk: int = 1,
        test_phrase_batch: int = 1500,
        shortlist: CCAClassifier = None,
        cascade_topk: int = 0,
    ):
        super().__init__()
        self.region_features = region_features
        self.classifier = classifier
        self.box_regressor = box_regressor
        self.box2box_transform = box2box_transform
        self.rois_per_phrase = rois_per_phrase
        self.positive_fraction = positive_fraction
        self.fg_threshold = fg_threshold
        self.smooth_l1_beta = smooth_l1_beta
        self.test_topk = test_topk
        self.test_phrase_batch = test_phrase_batch
        if cascade_topk and (shortlist is None or not hasattr(classifier, "score_encoded")):
            raise ValueError(f"CASCADE_TOPK {cascade_topk} needs a CCA shortlist and a classifier with score_encoded "
                             f"({type(classifier).__name__})")
        self.shortlist = shortlist
        self.cascade_topk = cascade_topk
        self._phrase_cache = None  # (phrase_feats, box-regression embeddings, classifier codes, shortlist codes)

    @classmethod
    def from_config(cls, cfg, input_shape, phrase_dim=None):
        h = cfg.MODEL.PHRASE_ROI_HEADS
        if phrase_dim is None:
            raise ValueError("PhraseROIHeads needs the phrase feature size: build it through PhraseRCNN")
        region_features = RegionFeatureExtractor(cfg, input_shape)
        cascade = h.CASCADE_TOPK
        if cascade < 0:
            raise ValueError(f"MODEL.PHRASE_ROI_HEADS.CASCADE_TOPK must be >= 0, got {cascade}")
        return {
            "region_features": region_features,
            "classifier": build_region_classifier(cfg, region_features.output_dim, phrase_dim),
            "box_regressor": PhraseBoxRegressor(region_features.output_dim, phrase_dim),
            "box2box_transform": Box2BoxTransform(weights=cfg.MODEL.ROI_BOX_HEAD.BBOX_REG_WEIGHTS),
            "rois_per_phrase": h.ROIS_PER_PHRASE,
            "positive_fraction": cfg.MODEL.ROI_HEADS.POSITIVE_FRACTION,
            "fg_threshold": cfg.MODEL.ROI_HEADS.IOU_THRESHOLDS[0],
            "smooth_l1_beta": cfg.MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA,
            "test_topk": h.TEST_TOPK,
            "test_phrase_batch": h.TEST_PHRASE_BATCH,
            "shortlist": CCAClassifier(cfg, region_features.output_dim, phrase_dim) if cascade else None,
            "cascade_topk": cascade,
        }

    # ---------------------------------------------------------------- training
    @torch.no_grad()
    def _sample(self, proposals, targets, num_phrases, negative_sources=None):
        """Per image: kept region boxes, PhraseTargets over them, matched gt boxes [P + K, R', 4]
        and the kept regions' index among the proposals followed by the gt boxes [R'].

        ``negative_sources``: per image, the source phrase (index among its P) of each of the K
        hard negatives that follow its phrases (None: no negatives)."""
        proposals = add_ground_truth_to_proposals(targets, proposals)
        negative_sources = negative_sources or [()] * len(proposals)
        out = []
        for props, tgt, P, neg in zip(proposals, targets, num_phrases, negative_sources):
            iou, matched = phrase_iou(props.proposal_boxes, tgt.gt_boxes, tgt.gt_phrase_ids, P)
            sampled = sample_regions_per_phrase(iou, self.rois_per_phrase, self.positive_fraction, self.fg_threshold)
            keep = sampled.any(dim=0)
            gt = tgt.gt_boxes.tensor[matched[:, keep]] if len(tgt) else iou.new_zeros((P, int(keep.sum()), 4))
            iou, sampled = iou[:, keep], sampled[:, keep]
            if len(neg):  # a negative's gt boxes are never read: it has no foreground
                iou, sampled = append_negative_targets(iou, sampled, neg, self.fg_threshold)
                gt = torch.cat([gt, gt[list(neg)]])
            out.append((props.proposal_boxes[keep], PhraseTargets(iou, sampled), gt, torch.nonzero(keep, as_tuple=True)[0]))
        return out

    def _box_loss(self, boxes, region_feats, phrase_embeds, targets, gt_boxes):
        """Smooth-L1 over foreground (phrase, region) pairs, normalized by the sampled pairs."""
        fg = targets.sampled & (targets.iou >= self.fg_threshold)
        p_idx, r_idx = torch.nonzero(fg, as_tuple=True)
        deltas = self.box_regressor(region_feats[r_idx], phrase_embeds[p_idx])
        gt_deltas = self.box2box_transform.get_deltas(boxes.tensor[r_idx], gt_boxes[p_idx, r_idx])
        loss = smooth_l1_loss(deltas, gt_deltas, self.smooth_l1_beta, reduction="sum")
        return loss / max(int(targets.sampled.sum()), 1)

    def losses(self, images, features, proposals, targets, phrase_feats, negative_sources=None, region_rows=None):
        """The losses of one batch. The sampled regions' features are computed from ``features``,
        or, with ``region_rows`` (per image, [R_i + G_i, D] features of its proposals followed by
        its gt boxes: :class:`~.region_cache.RegionCache`), looked up (``images`` and ``features``
        are then unused)."""
        num_negatives = [len(n) for n in negative_sources] if negative_sources else [0] * len(phrase_feats)
        samples = self._sample(proposals, targets, [len(v) - k for v, k in zip(phrase_feats, num_negatives)], negative_sources)
        boxes = [s[0] for s in samples]
        if region_rows is None:
            regions = self.region_features(features, boxes, images.image_sizes).split([len(b) for b in boxes])
        else:
            regions = [rows[s[3]] for rows, s in zip(region_rows, samples)]
        embeds = self.box_regressor.embed_phrases(cat(phrase_feats)).split([len(v) for v in phrase_feats])
        totals = {}
        for (b, tgt, gt, _), r, v, e in zip(samples, regions, phrase_feats, embeds):
            _, cls_losses = self.classifier(r, v, tgt)
            cls_losses["loss_phrase_box_reg"] = self._box_loss(b, r, e, tgt, gt)
            for k, val in cls_losses.items():
                totals[k] = totals.get(k, 0.0) + val / len(samples)
        return totals

    # ---------------------------------------------------------------- inference
    def train(self, mode: bool = True):
        self._phrase_cache = None  # weights change in training: phrase-side results go stale
        return super().train(mode)

    def _load_from_state_dict(self, *args, **kwargs):
        self._phrase_cache = None
        return super()._load_from_state_dict(*args, **kwargs)

    @torch.no_grad()
    def _phrase_side(self, phrase_feats):
        """The phrase-side work, done once for a vocabulary shared by every image (the same tensor):
        the box regressor's phrase embeddings [P, D_r], the classifier's phrase codes (the features
        themselves for a classifier without ``encode_phrases``) and the shortlist's codes (or None)."""
        if self._phrase_cache is None or self._phrase_cache[0] is not phrase_feats:
            encode = getattr(self.classifier, "encode_phrases", None)
            codes = encode(phrase_feats) if encode is not None else phrase_feats
            short = self.shortlist.encode_phrases(phrase_feats) if self.cascade_topk else None
            self._phrase_cache = (phrase_feats, self.box_regressor.embed_phrases(phrase_feats), codes, short)
        return self._phrase_cache[1:]

    def _scores(self, regions, codes, short_codes):
        """Classifier logits of B phrases' candidate regions: (logits [B, N], candidates [B, N] or None
        when every region is a candidate)."""
        if short_codes is not None and self.cascade_topk < len(regions):
            candidates = self.shortlist.score_encoded(regions, short_codes).topk(self.cascade_topk, dim=1).indices
            return self.classifier.score_encoded(regions, codes, candidates), candidates
        if hasattr(self.classifier, "score_encoded"):
            return self.classifier.score_encoded(regions, codes), None
        return self.classifier(regions, codes)[0], None

    @torch.no_grad()
    def _score_batch(self, boxes, regions, image_size, embeds, codes, short_codes=None):
        """Top-K regions of B phrases: scores [B, K] (sigmoid), refined boxes [B, K, 4]."""
        logits, candidates = self._scores(regions, codes, short_codes)
        k = min(self.test_topk, logits.shape[1])
        top, idx = logits.topk(k, dim=1)
        if candidates is not None:
            idx = candidates.gather(1, idx)
        deltas = self.box_regressor(regions[idx], embeds[:, None])
        refined = self.box2box_transform.apply_deltas(deltas.reshape(-1, 4), boxes.tensor[idx].reshape(-1, 4))
        h, w = image_size
        refined[:, 0::2] = refined[:, 0::2].clamp(0, w)
        refined[:, 1::2] = refined[:, 1::2].clamp(0, h)
        return top.sigmoid(), refined.reshape(len(embeds), k, 4)

    @torch.no_grad()
    def inference(self, images, features, proposals, phrase_feats, regions=None):
        """
        Args:
            phrase_feats: per image, [P_i, D_t] features of the phrases to score (all images may
                share one vocabulary tensor).
            regions: per image, [R_i, D] features of its proposals, looked up
                (:class:`~.region_cache.RegionCache`); None: computed from ``features``. With them,
                ``images`` may be a list of image sizes (H, W) and ``features`` None.

        Returns:
            per image, (scores [P_i, K], boxes [P_i, K, 4]) on the CPU, boxes in the resized image.
        """
        boxes = [p.proposal_boxes for p in proposals]
        sizes = getattr(images, "image_sizes", images)
        if regions is None:
            regions = self.region_features(features, boxes, sizes).split([len(b) for b in boxes])
        results = []
        for b, r, size, v in zip(boxes, regions, sizes, phrase_feats):
            if len(b) == 0:
                results.append((torch.full((len(v), 0), float("nan")), torch.zeros((len(v), 0, 4))))
                continue
            embeds, codes, short = self._phrase_side(v)
            step = self.test_phrase_batch
            parts = [self._score_batch(b, r, size, embeds[i:i + step], codes[i:i + step], None if short is None else short[i:i + step])
                     for i in range(0, len(v), step)]
            results.append((cat([s for s, _ in parts]).cpu(), cat([x for _, x in parts]).cpu()))
        return results

    def forward(self, images, features, proposals, targets=None, phrase_feats=None, negative_sources=None, region_rows=None):
        """Training: ``({}, losses)``; inference: ``(results, {})`` (see :meth:`inference`).
        ``negative_sources``: training with NPA only (see :meth:`_sample`); ``region_rows``:
        training on cached region features (see :meth:`losses`)."""
        if self.training:
            return {}, self.losses(images, features, proposals, targets, phrase_feats, negative_sources, region_rows)
        return self.inference(images, features, proposals, phrase_feats), {}
