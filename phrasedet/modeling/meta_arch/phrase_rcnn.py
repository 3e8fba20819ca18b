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
"""
import torch
from detectron2.config import configurable
from detectron2.modeling import META_ARCH_REGISTRY, GeneralizedRCNN, build_backbone
from detectron2.modeling.proposal_generator import build_proposal_generator
from detectron2.modeling.roi_heads import ROI_HEADS_REGISTRY

from ..phrase_features import PhraseFeatureBank, build_phrase_feature_bank

__all__ = ["PhraseRCNN"]


@META_ARCH_REGISTRY.register()
class PhraseRCNN(GeneralizedRCNN):
    @configurable
    def __init__(self, *, phrase_bank: PhraseFeatureBank, **kwargs):
        super().__init__(**kwargs)
        self.phrase_bank = phrase_bank
        self._last_phrases, self._last_feats = None, None

    @classmethod
    def from_config(cls, cfg):
        backbone = build_backbone(cfg)
        bank = build_phrase_feature_bank(cfg)
        return {
            "backbone": backbone,
            "proposal_generator": build_proposal_generator(cfg, backbone.output_shape()),
            "roi_heads": ROI_HEADS_REGISTRY.get(cfg.MODEL.ROI_HEADS.NAME)(cfg, backbone.output_shape(), phrase_dim=bank.dim),
            "input_format": cfg.INPUT.FORMAT,
            "vis_period": 0,
            "pixel_mean": cfg.MODEL.PIXEL_MEAN,
            "pixel_std": cfg.MODEL.PIXEL_STD,
            "phrase_bank": bank,
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
        images = self.preprocess_image(batched_inputs)
        gt_instances = [x["instances"].to(self.device) for x in batched_inputs]
        features = self.backbone(images.tensor)
        proposals, proposal_losses = self.proposal_generator(images, features, gt_instances)
        phrase_feats = [self.phrase_bank(x["phrases"]) for x in batched_inputs]
        _, detector_losses = self.roi_heads(images, features, proposals, gt_instances, phrase_feats)
        return {**detector_losses, **proposal_losses}

    @torch.no_grad()
    def inference(self, batched_inputs, detected_instances=None, do_postprocess=True):
        assert detected_instances is None, "PhraseRCNN does not take given boxes"
        images = self.preprocess_image(batched_inputs)
        features = self.backbone(images.tensor)
        proposals, _ = self.proposal_generator(images, features, None)
        phrases = [x["phrases"] for x in batched_inputs]
        results = self.roi_heads(images, features, proposals, None, [self._phrase_features(p) for p in phrases])[0]
        outputs = []
        for x, p, (scores, boxes), (h, w) in zip(batched_inputs, phrases, results, images.image_sizes):
            if do_postprocess:
                out_h, out_w = x.get("height", h), x.get("width", w)
                boxes = boxes * boxes.new_tensor([out_w / w, out_h / h] * 2)
            outputs.append({"phrases": p, "scores": scores, "boxes": boxes})
        return outputs
