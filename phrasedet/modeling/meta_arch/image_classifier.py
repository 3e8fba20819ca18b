"""``MultiLabelImageClassifier``: a CNN trained to say which objects an image holds, as ImageNet's
CNNs are trained; the built-in stand-in for ImageNet pretraining (``configs/pretraining/``).

images [B, 3, H, W] -> Detectron2 backbone -> the map ``MODEL.CLASSIFIER.FEATURE`` [B, C, h, w]
-> global average pooling [B, C] -> a linear layer -> one logit per label [B, L]; the loss
(``loss_labels``) is the binary cross-entropy of each label averaged over the images, then the
weighted mean over the labels, each weighing its group's ``MODEL.CLASSIFIER.GROUP_WEIGHTS``
(docs/DECISIONS.md: with equal weights, 6 shape labels among 131 weigh so little that the network
learns colours and not shapes).

Its ``backbone.*`` tensors are what a retrieval or pointing config loads with
``MODEL.RETRIEVAL.BACKBONE_WEIGHTS``: the same backbone config, the same names.

Inputs, per image: ``image`` (uint8 [3, H, W], ``INPUT.FORMAT``) and, in training, ``labels``
(float [L], 0 or 1). Inference returns ``{"scores": Tensor[L]}`` (sigmoid probabilities).
"""
import torch
import torch.nn.functional as F
from detectron2.config import configurable
from detectron2.modeling import META_ARCH_REGISTRY, build_backbone
from torch import nn

from phrasedet.data.synthetic.labels import label_groups

__all__ = ["MultiLabelImageClassifier"]


@META_ARCH_REGISTRY.register()
class MultiLabelImageClassifier(nn.Module):
    """See the module docstring.

    Args:
        backbone: a Detectron2 ``Backbone``.
        feature: the backbone output that is pooled.
        num_labels: L.
        pixel_mean, pixel_std: [3] pixel normalization.
        label_weights: optional [L] weight of each label in the loss (all 1 by default).
    """

    @configurable
    def __init__(self, *, backbone, feature: str, num_labels: int, pixel_mean=(103.53, 116.28, 123.675),
                 pixel_std=(1.0, 1.0, 1.0), label_weights=None):
        super().__init__()
        if feature not in backbone.output_shape():
            raise ValueError(f"MODEL.CLASSIFIER.FEATURE {feature!r} is not a backbone output "
                             f"({sorted(backbone.output_shape())}): add it to the backbone's OUT_FEATURES")
        if num_labels < 1:
            raise ValueError(f"MODEL.CLASSIFIER.NUM_LABELS must be >= 1, got {num_labels}")
        self.backbone, self.feature = backbone, feature
        self.head = nn.Linear(backbone.output_shape()[feature].channels, int(num_labels))
        weights = torch.ones(int(num_labels)) if label_weights is None else torch.as_tensor(label_weights, dtype=torch.float32)
        if weights.shape != (int(num_labels),) or not bool((weights >= 0).all()) or not float(weights.sum()) > 0:
            raise ValueError(f"label weights must be {num_labels} numbers >= 0, not all 0; got {weights.tolist()}")
        self.register_buffer("label_weights", weights / weights.sum(), False)
        self.register_buffer("pixel_mean", torch.tensor(pixel_mean, dtype=torch.float32).view(-1, 1, 1), False)
        self.register_buffer("pixel_std", torch.tensor(pixel_std, dtype=torch.float32).view(-1, 1, 1), False)

    @classmethod
    def from_config(cls, cfg):
        c = cfg.MODEL.CLASSIFIER
        groups = label_groups(cfg.PHRASEDET.PRETRAINING.LABEL_GROUPS)
        if len(groups) != c.NUM_LABELS:
            raise ValueError(f"MODEL.CLASSIFIER.NUM_LABELS is {c.NUM_LABELS} but PHRASEDET.PRETRAINING.LABEL_GROUPS "
                             f"{list(cfg.PHRASEDET.PRETRAINING.LABEL_GROUPS)} have {len(groups)} labels")
        return {"backbone": build_backbone(cfg), "feature": c.FEATURE, "num_labels": c.NUM_LABELS,
                "pixel_mean": cfg.MODEL.PIXEL_MEAN, "pixel_std": cfg.MODEL.PIXEL_STD,
                "label_weights": [float(c.GROUP_WEIGHTS[g.upper()]) for g in groups]}

    @property
    def device(self) -> torch.device:
        return self.pixel_mean.device

    def pooled(self, batched_inputs) -> torch.Tensor:
        """[B, C]: the average-pooled feature map."""
        images = torch.stack([x["image"] for x in batched_inputs]).to(self.device, torch.float32)
        return self.backbone((images - self.pixel_mean) / self.pixel_std)[self.feature].mean(dim=(2, 3))

    def forward(self, batched_inputs):
        logits = self.head(self.pooled(batched_inputs))
        if not self.training:
            return [{"scores": s} for s in torch.sigmoid(logits)]
        labels = torch.stack([x["labels"] for x in batched_inputs]).to(self.device, torch.float32)
        if labels.shape != logits.shape:
            raise ValueError(f"labels {list(labels.shape)} do not match the classifier's {list(logits.shape)}: "
                             "check MODEL.CLASSIFIER.NUM_LABELS against the dataset's label groups")
        per_label = F.binary_cross_entropy_with_logits(logits, labels, reduction="none").mean(0)  # [L]
        return {"loss_labels": (per_label * self.label_weights).sum()}
