"""``ImageTextEmbedding``: images and sentences in one space (papers 000 and 002; the retrieval family).

Image path (:mod:`..image_encoders`): a Detectron2 backbone with global pooling (average, max,
WELDON) and a projection (VSE++'s linear layer or paper 000's two-layer branch), or precomputed
features with the same projection. Text path: a sentence encoder from
``SENTENCE_ENCODER_REGISTRY`` (VSE++'s GRU, paper 000's branch over a fixed sentence vector).
Both embeddings are L2-normalized (the image one unless ``NORMALIZE_IMAGE`` is off, VSE0's
variant). Scores: cosine, or paper 000's similarity network (:mod:`..scorers`).

Inputs (from :class:`phrasedet.data.CaptionDatasetMapper`), per image: ``image`` [3, H, W] or
``image_feature`` [F], ``image_id``, ``dataset``, ``captions`` (list of str). Training returns
the losses of ``MODEL.RETRIEVAL.LOSS``; inference returns, per input::

    {"image_embedding": Tensor[E], "caption_embeddings": Tensor[n_captions, E]}

and :attr:`scorer` scores them (the retrieval evaluator is given it).
"""
import hashlib

import torch
import torch.nn.functional as F
from detectron2.config import configurable
from detectron2.data import DatasetCatalog
from detectron2.modeling import META_ARCH_REGISTRY, build_backbone
from torch import nn

from phrasedet.data.image_features import attach_image_features, feature_dim

from ..backbone_weights import load_backbone_weights
from ..image_encoders import FeatureImageEncoder, PixelImageEncoder
from ..losses import LogisticPairLoss, RankingLoss
from ..pooling import build_global_pooling
from ..projection import build_projection
from ..scorers import build_scorer
from ..sentence_encoders import build_sentence_encoder

__all__ = ["ImageTextEmbedding", "image_key"]

IMAGE_INPUTS = ("pixels", "features")
LOSSES = ("ranking", "logistic")


def image_key(dataset: str, image_id) -> int:
    """A 63-bit identifier of a dataset image (equal for the same image in any process)."""
    digest = hashlib.sha1(f"{dataset}\0{image_id}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _check(cfg) -> None:
    r = cfg.MODEL.RETRIEVAL
    if r.IMAGE_INPUT not in IMAGE_INPUTS:
        raise ValueError(f"MODEL.RETRIEVAL.IMAGE_INPUT must be one of {IMAGE_INPUTS}, got {r.IMAGE_INPUT!r}")
    if r.LOSS.TYPE not in LOSSES:
        raise ValueError(f"MODEL.RETRIEVAL.LOSS.TYPE must be one of {LOSSES}, got {r.LOSS.TYPE!r}")
    if (r.SCORE == "similarity_network") != (r.LOSS.TYPE == "logistic"):
        raise ValueError("MODEL.RETRIEVAL.SCORE 'similarity_network' goes with LOSS.TYPE 'logistic' (paper 000) and "
                         f"'cosine' with 'ranking'; got SCORE {r.SCORE!r} with LOSS.TYPE {r.LOSS.TYPE!r}")


def _feature_file(cfg) -> str:
    """The features file of the first non-empty configured split (checked against it), to read
    the feature size from."""
    for name in list(cfg.DATASETS.TRAIN) + list(cfg.DATASETS.TEST):
        records = DatasetCatalog.get(name)
        if records:
            return attach_image_features(records, name, cfg.MODEL.RETRIEVAL.IMAGE_FEATURES_DIR)[0]["feature_file"]
    raise ValueError("MODEL.RETRIEVAL.IMAGE_INPUT 'features' needs a non-empty DATASETS.TRAIN or DATASETS.TEST")


def build_image_encoder(cfg) -> nn.Module:
    """The image path of ``cfg`` (see the module docstring)."""
    r = cfg.MODEL.RETRIEVAL
    if r.IMAGE_INPUT == "features":
        if r.ADAPTATION_DIM:
            raise ValueError("MODEL.RETRIEVAL.ADAPTATION_DIM needs IMAGE_INPUT 'pixels': precomputed features are "
                             "pooled before any adaptation convolution")
        dim = feature_dim(_feature_file(cfg))
        return FeatureImageEncoder(dim, build_projection(r.IMAGE_PROJECTION, dim, cfg), r.NORMALIZE_POOLED, r.POOLED_DROPOUT)
    backbone = build_backbone(cfg)
    if r.BACKBONE_WEIGHTS:
        load_backbone_weights(backbone, r.BACKBONE_WEIGHTS)
    if r.FREEZE_BACKBONE_ITERS < 0:
        for p in backbone.parameters():
            p.requires_grad_(False)
    if r.BACKBONE_FEATURE not in backbone.output_shape():
        raise ValueError(f"MODEL.RETRIEVAL.BACKBONE_FEATURE {r.BACKBONE_FEATURE!r} is not a backbone output "
                         f"({sorted(backbone.output_shape())}): add it to the backbone's OUT_FEATURES")
    channels = backbone.output_shape()[r.BACKBONE_FEATURE].channels
    adaptation = nn.Conv2d(channels, r.ADAPTATION_DIM, 1, bias=r.ADAPTATION_BIAS) if r.ADAPTATION_DIM else None
    if adaptation is not None and r.FREEZE_BACKBONE_ITERS < 0 and r.ADAPTATION_FROZEN_WITH_BACKBONE:
        adaptation.requires_grad_(False)
    pooled_dim = r.ADAPTATION_DIM or channels
    return PixelImageEncoder(backbone, r.BACKBONE_FEATURE, build_global_pooling(r.POOLING, r.WELDON_K_MAX, r.WELDON_K_MIN),
                             build_projection(r.IMAGE_PROJECTION, pooled_dim, cfg), r.NORMALIZE_POOLED,
                             backbone_trainable=r.FREEZE_BACKBONE_ITERS == 0, adaptation=adaptation,
                             adaptation_frozen_with_backbone=r.ADAPTATION_FROZEN_WITH_BACKBONE, dropout=r.POOLED_DROPOUT)


def build_loss(cfg) -> nn.Module:
    """``MODEL.RETRIEVAL.LOSS``: :class:`RankingLoss` or :class:`LogisticPairLoss`."""
    l = cfg.MODEL.RETRIEVAL.LOSS
    if l.TYPE == "logistic":
        return LogisticPairLoss(l.REDUCTION)
    return RankingLoss(margin=l.MARGIN, negatives=l.NEGATIVES, topk=l.TOPK, distance=l.DISTANCE,
                       image_weight=l.IMAGE_ANCHOR_WEIGHT, caption_weight=l.CAPTION_ANCHOR_WEIGHT,
                       neighbourhood_weight=l.NEIGHBOURHOOD_WEIGHT, reduction=l.REDUCTION,
                       mask_same_image=l.MASK_SAME_IMAGE, gather=l.GATHER_NEGATIVES)


@META_ARCH_REGISTRY.register()
class ImageTextEmbedding(nn.Module):
    """See the module docstring.

    Args:
        image_encoder: :class:`PixelImageEncoder` or :class:`FeatureImageEncoder`.
        sentence_encoder: list of C captions -> [C, E].
        scorer: ``pairwise`` / ``paired`` scores of embeddings.
        loss: :class:`RankingLoss` (called with embeddings) or :class:`LogisticPairLoss` (with the scorer too).
        normalize_image: L2-normalize image embeddings.
        pixel_mean, pixel_std: [3] pixel normalization of the pixel path.
    """

    @configurable
    def __init__(self, *, image_encoder, sentence_encoder, scorer, loss, normalize_image: bool = True,
                 pixel_mean=(103.53, 116.28, 123.675), pixel_std=(1.0, 1.0, 1.0)):
        super().__init__()
        self.image_encoder, self.sentence_encoder = image_encoder, sentence_encoder
        self.scorer, self.loss = scorer, loss
        self.normalize_image = normalize_image
        self.register_buffer("pixel_mean", torch.tensor(pixel_mean, dtype=torch.float32).view(-1, 1, 1), False)
        self.register_buffer("pixel_std", torch.tensor(pixel_std, dtype=torch.float32).view(-1, 1, 1), False)

    @classmethod
    def from_config(cls, cfg):
        _check(cfg)
        r = cfg.MODEL.RETRIEVAL
        return {
            "image_encoder": build_image_encoder(cfg),
            "sentence_encoder": build_sentence_encoder(cfg),
            "scorer": build_scorer(r.SCORE, r.EMBED_DIM, tuple(r.SIMILARITY_NETWORK.HIDDEN_DIMS)),
            "loss": build_loss(cfg),
            "normalize_image": r.NORMALIZE_IMAGE,
            "pixel_mean": cfg.MODEL.PIXEL_MEAN,
            "pixel_std": cfg.MODEL.PIXEL_STD,
        }

    @property
    def device(self) -> torch.device:
        return self.pixel_mean.device

    @property
    def uses_pixels(self) -> bool:
        return isinstance(self.image_encoder, PixelImageEncoder)

    def image_inputs(self, batched_inputs) -> torch.Tensor:
        """[B, 3, H, W] normalized pixels (all images of a batch have one size) or [B, F] features."""
        if not self.uses_pixels:
            return torch.stack([x["image_feature"] for x in batched_inputs]).to(self.device)
        shapes = {tuple(x["image"].shape) for x in batched_inputs}
        if len(shapes) > 1:
            raise ValueError(f"images of one batch must have one size for global pooling, got {sorted(shapes)}: "
                             "check INPUT.RETRIEVAL.RESIZE_MODE")
        images = torch.stack([x["image"] for x in batched_inputs]).to(self.device, torch.float32)
        return (images - self.pixel_mean) / self.pixel_std

    def embed_images(self, batched_inputs) -> torch.Tensor:
        """[B, E] image embeddings (L2-normalized unless ``normalize_image`` is off)."""
        out = self.image_encoder(self.image_inputs(batched_inputs))
        return F.normalize(out, dim=-1) if self.normalize_image else out

    def embed_captions(self, captions) -> torch.Tensor:
        """list of C caption strings -> [C, E] L2-normalized."""
        return F.normalize(self.sentence_encoder(list(captions)), dim=-1)

    def forward(self, batched_inputs):
        if not self.training:
            return self.inference(batched_inputs)
        images = self.embed_images(batched_inputs)
        captions = [c for x in batched_inputs for c in x["captions"]]
        owner = torch.tensor([i for i, x in enumerate(batched_inputs) for _ in x["captions"]], dtype=torch.long, device=self.device)
        keys = torch.tensor([image_key(x.get("dataset", ""), x["image_id"]) for x in batched_inputs], dtype=torch.long, device=self.device)
        embedded = self.embed_captions(captions)
        if isinstance(self.loss, LogisticPairLoss):
            return self.loss(self.scorer, images, embedded, owner, keys)
        return self.loss(images, embedded, owner, keys)

    @torch.no_grad()
    def inference(self, batched_inputs):
        images = self.embed_images(batched_inputs)
        return [{"image_embedding": img, "caption_embeddings": self.embed_captions(x["captions"])}
                for img, x in zip(images, batched_inputs)]

    @property
    def needs_unused_parameters(self) -> bool:
        """DistributedDataParallel must tolerate parameters without gradients: a backbone that is
        frozen until an iteration gets none before it."""
        enc = self.image_encoder
        return self.uses_pixels and not enc.backbone_trainable and any(p.requires_grad for p in enc.backbone.parameters())
