"""``PhraseRCNN``: backbone + phrase-agnostic RPN + phrase-conditioned ROI heads (paper 003).

Phrase features enter through the meta-architecture (as Detic's ``CustomRCNN`` passes text
embeddings to its ROI heads): each input's ``phrases`` are looked up in a frozen
:class:`PhraseFeatureBank` and handed to ``roi_heads`` next to the proposals.

Inputs (from :class:`phrasedet.data.PhraseDatasetMapper`): ``image``, ``instances``
(``gt_boxes``, ``gt_phrase_ids``) and ``phrases``. Outputs at inference, per image::

    {"phrases": list[str] (P), "scores": Tensor[P, K], "boxes": Tensor[P, K, 4]}

with boxes in the original image's coordinates. The phrases scored are each input's
``phrases``: an image's own (phrase localization), or a whole vocabulary given to every image by
the test mapper (open-ended phrase detection); the features of the last list seen are kept, so a
shared vocabulary is looked up once.

A frozen detector (stage 3 of paper 003's recipe: backbone, RPN and region features trained no
more) proposes in training what it proposes at test (the RPN runs in inference mode: no RPN loss,
no random anchor sampling), so its region features can be computed once per image:
``region_cache`` (a :class:`~phrasedet.modeling.roi_heads.region_cache.RegionCache`, not a model
weight; None = off) then replaces backbone, RPN and region features of every image it has seen,
in training and at inference.

Negative phrase augmentation (``MODEL.PHRASE_ROI_HEADS.NPA``, training only): each image's phrases
are followed by hard negatives drawn from ``negative_phrases`` (a
:class:`~phrasedet.modeling.roi_heads.negative_phrases.NegativePhraseTable`, built and refreshed by
the trainer's :class:`~phrasedet.engine.npa_hook.NegativePhraseHook`; not a model weight).
"""
import torch
from detectron2.config import configurable
from detectron2.modeling import META_ARCH_REGISTRY, GeneralizedRCNN, build_backbone
from detectron2.modeling.proposal_generator import build_proposal_generator
from detectron2.modeling.roi_heads import ROI_HEADS_REGISTRY
from detectron2.utils.events import get_event_storage

from ..phrase_features import PhraseFeatureBank, build_phrase_feature_bank
from ..roi_heads.negative_phrases import draw_negatives
from ..roi_heads.region_cache import RegionCache

__all__ = ["PhraseRCNN"]


@META_ARCH_REGISTRY.register()
class PhraseRCNN(GeneralizedRCNN):
    @configurable
    def __init__(self, *, phrase_bank: PhraseFeatureBank, npa_fraction: float = 0.0, **kwargs):
        """``npa_fraction``: > 0 appends ceil(npa_fraction * P) hard negative phrases to each
        training image of P phrases (NPA); 0 = off."""
        super().__init__(**kwargs)
        self.phrase_bank = phrase_bank
        self._last_phrases, self._last_feats = None, None
        self.npa_fraction = float(npa_fraction)
        self.negative_phrases = None  # NegativePhraseTable, set by NegativePhraseHook when NPA is on
        self.region_cache: RegionCache = None  # set by the recipe's stage 3 (PHRASEDET.RECIPE.REGION_CACHE)

    @classmethod
    def from_config(cls, cfg):
        backbone = build_backbone(cfg)
        bank = build_phrase_feature_bank(cfg)
        npa = cfg.MODEL.PHRASE_ROI_HEADS.NPA
        if npa.ENABLED and not 0 < npa.NEGATIVES_PER_IMAGE_FRACTION <= 1:
            raise ValueError(f"MODEL.PHRASE_ROI_HEADS.NPA.NEGATIVES_PER_IMAGE_FRACTION must be in (0, 1], got {npa.NEGATIVES_PER_IMAGE_FRACTION}")
        if npa.ENABLED and cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER != "QARCNNClassifier":
            raise ValueError("MODEL.PHRASE_ROI_HEADS.NPA.ENABLED is QA R-CNN's negative phrase augmentation: it needs "
                             f"MODEL.PHRASE_ROI_HEADS.CLASSIFIER 'QARCNNClassifier', got {cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER!r}")
        return {
            "backbone": backbone,
            "proposal_generator": build_proposal_generator(cfg, backbone.output_shape()),
            "roi_heads": ROI_HEADS_REGISTRY.get(cfg.MODEL.ROI_HEADS.NAME)(cfg, backbone.output_shape(), phrase_dim=bank.dim),
            "input_format": cfg.INPUT.FORMAT,
            "vis_period": 0,
            "pixel_mean": cfg.MODEL.PIXEL_MEAN,
            "pixel_std": cfg.MODEL.PIXEL_STD,
            "phrase_bank": bank,
            "npa_fraction": npa.NEGATIVES_PER_IMAGE_FRACTION if npa.ENABLED else 0.0,
        }

    def _phrase_features(self, phrases):
        """[P, D_t] features of ``phrases``, reusing the previous list's when it is the same."""
        key = tuple(phrases)
        if self._last_phrases != key:
            self._last_phrases, self._last_feats = key, self.phrase_bank(phrases)
        return self._last_feats.to(self.device)

    def forward(self, batched_inputs):
        if not self.training:
            return self.inference(batched_inputs)
        gt_instances = [x["instances"].to(self.device) for x in batched_inputs]
        cached = self.region_cache.lookup(batched_inputs) if self.region_cache is not None else None
        if cached is None:
            images = self.preprocess_image(batched_inputs)
            features = self.backbone(images.tensor)
            proposals, proposal_losses = self._proposals(images, features, gt_instances)
        else:
            images, features, proposal_losses = None, None, {}
            proposals = [c.proposals(self.device) for c in cached]
        phrases = [x["phrases"] for x in batched_inputs]
        extra = {}
        if self.npa_fraction > 0:
            phrases, extra["negative_sources"] = self._with_negatives(phrases)
        if cached is not None:
            extra["region_rows"] = [c.region_rows(g.gt_boxes.tensor, self.device) for c, g in zip(cached, gt_instances)]
        phrase_feats = [self.phrase_bank(p) for p in phrases]
        _, detector_losses = self.roi_heads(images, features, proposals, gt_instances, phrase_feats, **extra)
        return {**detector_losses, **proposal_losses}

    def _proposals(self, images, features, gt_instances):
        """The RPN's proposals and losses in training; a frozen RPN proposes as at test and has no
        loss (it would be a constant, and its anchor sampling would draw from the random stream)."""
        rpn = self.proposal_generator
        if any(p.requires_grad for p in rpn.parameters()):
            return rpn(images, features, gt_instances)
        rpn.train(False)
        try:
            proposals, _ = rpn(images, features, None)
        finally:
            rpn.train(True)
        return proposals, {}

    def _with_negatives(self, phrases):
        """Each image's phrases followed by its hard negatives (NPA), and per image the index of
        each negative's source phrase (draws from torch's RNG, seeded per iteration)."""
        if self.negative_phrases is None:
            raise RuntimeError("MODEL.PHRASE_ROI_HEADS.NPA.ENABLED but no negative phrase table: PhrasedetTrainer's "
                               "NegativePhraseHook builds it before the first step (set model.negative_phrases to train without it)")
        drawn = [draw_negatives(self.negative_phrases, p, self.npa_fraction) for p in phrases]
        get_event_storage().put_scalar("npa/negatives_per_image", sum(len(n) for _, n in drawn) / max(len(drawn), 1))
        return [list(p) + n for p, (_, n) in zip(phrases, drawn)], [s for s, _ in drawn]

    @torch.no_grad()
    def inference(self, batched_inputs, detected_instances=None, do_postprocess=True):
        assert detected_instances is None, "PhraseRCNN does not take given boxes"
        phrases = [x["phrases"] for x in batched_inputs]
        feats = [self._phrase_features(p) for p in phrases]
        cached = self.region_cache.lookup(batched_inputs) if self.region_cache is not None else None
        if cached is None:
            images = self.preprocess_image(batched_inputs)
            features = self.backbone(images.tensor)
            proposals, _ = self.proposal_generator(images, features, None)
            sizes = images.image_sizes
            results = self.roi_heads(images, features, proposals, None, feats)[0]
        else:
            sizes = [c.image_size for c in cached]
            proposals = [c.proposals(self.device) for c in cached]
            regions = [c.proposal_features.to(self.device) for c in cached]
            results = self.roi_heads.inference(sizes, None, proposals, feats, regions=regions)
        outputs = []
        for x, p, (scores, boxes), (h, w) in zip(batched_inputs, phrases, results, sizes):
            if do_postprocess:
                out_h, out_w = x.get("height", h), x.get("width", w)
                boxes = boxes * boxes.new_tensor([out_w / w, out_h / h] * 2)
            outputs.append({"phrases": p, "scores": scores, "boxes": boxes})
        return outputs
