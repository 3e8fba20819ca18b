"""``ImageTextEmbedding``: images and sentences in one space (papers 000, 001 and 002; the retrieval family).

Image path (:mod:`..image_encoders`): a Detectron2 backbone with global pooling (average, max,
WELDON) and a projection (VSE++'s linear layer or paper 000's two-layer branch), or precomputed
features with the same projection. Text path: a sentence encoder from
``SENTENCE_ENCODER_REGISTRY`` (VSE++'s GRU, paper 000's branch over a fixed sentence vector,
paper 001's text CNN). Both embeddings are L2-normalized (the image one unless
``NORMALIZE_IMAGE`` is off, VSE0's variant). Scores: cosine, or paper 000's similarity network
(:mod:`..scorers`).

Losses: the ranking, logistic or InfoNCE loss of ``MODEL.RETRIEVAL.LOSS`` (weighted by ``LOSS.WEIGHT``,
paper 001's lambda_1; 0 leaves it out) and paper 001's instance loss
(``MODEL.RETRIEVAL.INSTANCE_LOSS``): a bias-free classifier shared by both modalities, one class
per image of ``DATASETS.TRAIN`` (in dataset order), on the unnormalized features. At test,
``TEST.RETRIEVAL.FLIP_AVERAGE`` averages each image's features with its horizontal flip's
(paper 001) before normalizing.

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

from ..checkpoint import load_backbone_weights
from ..image_encoders import FeatureImageEncoder, PixelImageEncoder, StoredMapsBackbone
from ..losses import InfoNCELoss, InstanceLoss, LogisticPairLoss, RankingLoss
from ..pooling import build_global_pooling
from ..projection import build_projection
from ..scorers import build_scorer
from ..sentence_encoders import build_sentence_encoder
from ..sentence_encoders.build import check_fingerprint, fingerprint_value

__all__ = ["ImageTextEmbedding", "image_key", "training_image_classes"]

IMAGE_INPUTS = ("pixels", "features", "maps")
LOSSES = ("ranking", "logistic", "infonce")


def image_key(dataset: str, image_id) -> int:
    """A 63-bit identifier of a dataset image (equal for the same image in any process)."""
    digest = hashlib.sha1(f"{dataset}\0{image_id}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def training_image_classes(cfg) -> dict:
    """Paper 001's instance classes: :func:`image_key` of every image of ``DATASETS.TRAIN`` -> its
    class index, in dataset order (an image listed by two training splits is one class)."""
    classes = {}
    for name in cfg.DATASETS.TRAIN:
        for record in DatasetCatalog.get(name):
            classes.setdefault(image_key(record.get("dataset", ""), record["image_id"]), len(classes))
    if not classes:
        raise ValueError("MODEL.RETRIEVAL.INSTANCE_LOSS needs training images (one class each): DATASETS.TRAIN is empty")
    return classes


def _check(cfg) -> None:
    r = cfg.MODEL.RETRIEVAL
    if r.LOSS.WEIGHT < 0 or r.INSTANCE_LOSS.IMAGE_WEIGHT < 0 or r.INSTANCE_LOSS.TEXT_WEIGHT < 0:
        raise ValueError("MODEL.RETRIEVAL.LOSS.WEIGHT and INSTANCE_LOSS.IMAGE_WEIGHT / TEXT_WEIGHT must be >= 0, got "
                         f"{r.LOSS.WEIGHT}, {r.INSTANCE_LOSS.IMAGE_WEIGHT}, {r.INSTANCE_LOSS.TEXT_WEIGHT}")
    if not (r.LOSS.WEIGHT or r.INSTANCE_LOSS.IMAGE_WEIGHT or r.INSTANCE_LOSS.TEXT_WEIGHT):
        raise ValueError("MODEL.RETRIEVAL.LOSS.WEIGHT and INSTANCE_LOSS.IMAGE_WEIGHT / TEXT_WEIGHT are all 0: nothing to train on")
    if cfg.TEST.RETRIEVAL.FLIP_AVERAGE and r.IMAGE_INPUT != "pixels":
        raise ValueError("TEST.RETRIEVAL.FLIP_AVERAGE flips the image: it needs MODEL.RETRIEVAL.IMAGE_INPUT 'pixels'")
    if r.IMAGE_INPUT not in IMAGE_INPUTS:
        raise ValueError(f"MODEL.RETRIEVAL.IMAGE_INPUT must be one of {IMAGE_INPUTS}, got {r.IMAGE_INPUT!r}")
    if r.LOSS.TYPE not in LOSSES:
        raise ValueError(f"MODEL.RETRIEVAL.LOSS.TYPE must be one of {LOSSES}, got {r.LOSS.TYPE!r}")
    if (r.SCORE == "similarity_network") != (r.LOSS.TYPE == "logistic"):
        raise ValueError("MODEL.RETRIEVAL.SCORE 'similarity_network' goes with LOSS.TYPE 'logistic' (paper 000) and "
                         f"'cosine' with 'ranking' or 'infonce'; got SCORE {r.SCORE!r} with LOSS.TYPE {r.LOSS.TYPE!r}")


def _feature_file(cfg) -> str:
    """The features file of the first non-empty configured split (checked against it), to read
    the feature size from."""
    for name in list(cfg.DATASETS.TRAIN) + list(cfg.DATASETS.TEST):
        records = DatasetCatalog.get(name)
        if records:
            return attach_image_features(records, name, cfg.MODEL.RETRIEVAL.IMAGE_FEATURES_DIR)[0]["feature_file"]
    raise ValueError(f"MODEL.RETRIEVAL.IMAGE_INPUT {cfg.MODEL.RETRIEVAL.IMAGE_INPUT!r} needs a non-empty DATASETS.TRAIN or "
                     "DATASETS.TEST")


def build_image_encoder(cfg) -> nn.Module:
    """The image path of ``cfg`` (see the module docstring)."""
    r = cfg.MODEL.RETRIEVAL
    if r.IMAGE_INPUT == "features":
        if r.ADAPTATION_DIM:
            raise ValueError("MODEL.RETRIEVAL.ADAPTATION_DIM needs IMAGE_INPUT 'pixels': precomputed features are "
                             "pooled before any adaptation convolution")
        dim = feature_dim(_feature_file(cfg))
        return FeatureImageEncoder(dim, build_projection(r.IMAGE_PROJECTION, dim, cfg), r.NORMALIZE_POOLED, r.POOLED_DROPOUT)
    if r.IMAGE_INPUT == "maps":
        if r.BACKBONE_WEIGHTS or r.FREEZE_BACKBONE_ITERS >= 0:
            raise ValueError("MODEL.RETRIEVAL.IMAGE_INPUT 'maps' reads precomputed maps in place of the backbone: "
                             "BACKBONE_WEIGHTS must be empty and FREEZE_BACKBONE_ITERS -1")
        backbone, feature = StoredMapsBackbone(feature_dim(_feature_file(cfg))), StoredMapsBackbone.FEATURE
    else:
        backbone, feature = build_backbone(cfg), r.BACKBONE_FEATURE
        if r.BACKBONE_WEIGHTS:
            load_backbone_weights(backbone, r.BACKBONE_WEIGHTS)
    if r.FREEZE_BACKBONE_ITERS < 0:
        for p in backbone.parameters():
            p.requires_grad_(False)
    if feature not in backbone.output_shape():
        raise ValueError(f"MODEL.RETRIEVAL.BACKBONE_FEATURE {feature!r} is not a backbone output "
                         f"({sorted(backbone.output_shape())}): add it to the backbone's OUT_FEATURES")
    channels = backbone.output_shape()[feature].channels
    adaptation = nn.Conv2d(channels, r.ADAPTATION_DIM, 1, bias=r.ADAPTATION_BIAS) if r.ADAPTATION_DIM else None
    if adaptation is not None and r.FREEZE_BACKBONE_ITERS < 0 and r.ADAPTATION_FROZEN_WITH_BACKBONE:
        adaptation.requires_grad_(False)
    pooled_dim = r.ADAPTATION_DIM or channels
    return PixelImageEncoder(backbone, feature, build_global_pooling(r.POOLING, r.WELDON_K_MAX, r.WELDON_K_MIN),
                             build_projection(r.IMAGE_PROJECTION, pooled_dim, cfg), r.NORMALIZE_POOLED,
                             backbone_trainable=r.FREEZE_BACKBONE_ITERS == 0, adaptation=adaptation,
                             adaptation_frozen_with_backbone=r.ADAPTATION_FROZEN_WITH_BACKBONE, dropout=r.POOLED_DROPOUT)


def build_instance_loss(cfg, classes: dict):
    """``MODEL.RETRIEVAL.INSTANCE_LOSS`` over ``classes`` (:func:`training_image_classes`), or None
    when both of its weights are 0."""
    i = cfg.MODEL.RETRIEVAL.INSTANCE_LOSS
    if not (i.IMAGE_WEIGHT or i.TEXT_WEIGHT):
        return None
    return InstanceLoss(cfg.MODEL.RETRIEVAL.EMBED_DIM, len(classes), i.IMAGE_WEIGHT, i.TEXT_WEIGHT)


def build_loss(cfg) -> nn.Module:
    """``MODEL.RETRIEVAL.LOSS``: :class:`RankingLoss`, :class:`LogisticPairLoss` or :class:`InfoNCELoss`."""
    l = cfg.MODEL.RETRIEVAL.LOSS
    if l.TYPE == "logistic":
        return LogisticPairLoss(l.REDUCTION)
    if l.TYPE == "infonce":
        return InfoNCELoss(l.TEMPERATURE, l.LEARN_TEMPERATURE, l.MAX_LOGIT_SCALE, gather=l.GATHER_NEGATIVES)
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
        loss: :class:`RankingLoss` or :class:`InfoNCELoss` (called with embeddings) or :class:`LogisticPairLoss`
            (with the scorer too).
        normalize_image: L2-normalize image embeddings.
        pixel_mean, pixel_std: [3] pixel normalization of the pixel path.
        loss_weight: weight of ``loss`` (paper 001's lambda_1); 0 = not computed.
        instance_loss: optional :class:`InstanceLoss` (paper 001).
        image_classes: :func:`image_key` -> instance class, for ``instance_loss``.
        flip_average: at test, average each image's features with its horizontal flip's.
    """

    @configurable
    def __init__(self, *, image_encoder, sentence_encoder, scorer, loss, normalize_image: bool = True,
                 pixel_mean=(103.53, 116.28, 123.675), pixel_std=(1.0, 1.0, 1.0), loss_weight: float = 1.0,
                 instance_loss=None, image_classes=None, flip_average: bool = False):
        super().__init__()
        self.image_encoder, self.sentence_encoder = image_encoder, sentence_encoder
        self.scorer, self.loss = scorer, loss
        self.normalize_image = normalize_image
        self.loss_weight, self.instance_loss, self.flip_average = float(loss_weight), instance_loss, flip_average
        if instance_loss is not None:
            if image_classes is None or len(image_classes) != instance_loss.num_classes:
                raise ValueError(f"the instance loss has {instance_loss.num_classes} classes but "
                                 f"{len(image_classes or ())} training images were given")
            self.image_classes = dict(image_classes)
            fingerprint = hashlib.sha1(",".join(map(str, sorted(image_classes.items(), key=lambda kv: kv[1]))).encode()).hexdigest()
            self.register_buffer("classes_fingerprint", torch.tensor([fingerprint_value(fingerprint)], dtype=torch.long))
        self.register_buffer("pixel_mean", torch.tensor(pixel_mean, dtype=torch.float32).view(-1, 1, 1), False)
        self.register_buffer("pixel_std", torch.tensor(pixel_std, dtype=torch.float32).view(-1, 1, 1), False)

    @classmethod
    def from_config(cls, cfg):
        _check(cfg)
        r = cfg.MODEL.RETRIEVAL
        classes = training_image_classes(cfg) if (r.INSTANCE_LOSS.IMAGE_WEIGHT or r.INSTANCE_LOSS.TEXT_WEIGHT) else None
        return {
            "image_encoder": build_image_encoder(cfg),
            "sentence_encoder": build_sentence_encoder(cfg),
            "scorer": build_scorer(r.SCORE, r.EMBED_DIM, tuple(r.SIMILARITY_NETWORK.HIDDEN_DIMS)),
            "loss": build_loss(cfg),
            "normalize_image": r.NORMALIZE_IMAGE,
            "pixel_mean": cfg.MODEL.PIXEL_MEAN,
            "pixel_std": cfg.MODEL.PIXEL_STD,
            "loss_weight": r.LOSS.WEIGHT,
            "instance_loss": build_instance_loss(cfg, classes) if classes else None,
            "image_classes": classes,
            "flip_average": cfg.TEST.RETRIEVAL.FLIP_AVERAGE,
        }

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if self.instance_loss is not None:
            check_fingerprint(state_dict, prefix + "classes_fingerprint", self.classes_fingerprint,
                              "those of DATASETS.TRAIN now (one instance class each); use the training splits it was "
                              "trained with", kind="training images")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def device(self) -> torch.device:
        return self.pixel_mean.device

    @property
    def uses_pixels(self) -> bool:
        return isinstance(self.image_encoder, PixelImageEncoder) and not self.uses_stored_maps

    @property
    def uses_stored_maps(self) -> bool:
        """``MODEL.RETRIEVAL.IMAGE_INPUT "maps"``: precomputed pre-pooling maps in place of the backbone's."""
        return isinstance(getattr(self.image_encoder, "backbone", None), StoredMapsBackbone)

    def image_inputs(self, batched_inputs) -> torch.Tensor:
        """[B, 3, H, W] normalized pixels (all images of a batch have one size), [B, F] features or
        [B, C, h, w] stored maps."""
        if not self.uses_pixels:
            return torch.stack([x["image_feature"] for x in batched_inputs]).to(self.device)
        shapes = {tuple(x["image"].shape) for x in batched_inputs}
        if len(shapes) > 1:
            raise ValueError(f"images of one batch must have one size for global pooling, got {sorted(shapes)}: "
                             "check INPUT.RETRIEVAL.RESIZE_MODE")
        images = torch.stack([x["image"] for x in batched_inputs]).to(self.device, torch.float32)
        return (images - self.pixel_mean) / self.pixel_std

    def image_features(self, batched_inputs) -> torch.Tensor:
        """[B, E] image features before normalization (at test averaged with the horizontal
        flip's when ``flip_average``)."""
        images = self.image_inputs(batched_inputs)
        out = self.image_encoder(images)
        if self.flip_average and not self.training:
            out = (out + self.image_encoder(images.flip(-1))) / 2
        return out

    def _normalize_images(self, features: torch.Tensor) -> torch.Tensor:
        return F.normalize(features, dim=-1) if self.normalize_image else features

    def embed_images(self, batched_inputs) -> torch.Tensor:
        """[B, E] image embeddings (L2-normalized unless ``normalize_image`` is off)."""
        return self._normalize_images(self.image_features(batched_inputs))

    def embed_captions(self, captions) -> torch.Tensor:
        """list of C caption strings -> [C, E] L2-normalized."""
        return F.normalize(self.sentence_encoder(list(captions)), dim=-1)

    def embed_caption_lists(self, caption_lists) -> list:
        """B lists of caption strings -> B tensors [C_b, E], L2-normalized: the captions of every
        list go through the sentence encoder as one batch (a test batch's 5 x B captions at once:
        3.5x faster per caption than image by image for the GRU on CPU), then split back."""
        counts = [len(c) for c in caption_lists]
        return list(self.embed_captions([c for captions in caption_lists for c in captions]).split(counts))

    def instance_classes(self, batched_inputs, keys) -> torch.Tensor:
        """[B] long: the instance class of each training image, given its :func:`image_key` in
        ``keys`` (an error names an image outside ``DATASETS.TRAIN``)."""
        classes = []
        for x, key in zip(batched_inputs, keys):
            c = self.image_classes.get(key)
            if c is None:
                raise ValueError(f"image {x['image_id']!r} of dataset {x.get('dataset', '')!r} is not a training image: "
                                 "the instance loss has one class per image of DATASETS.TRAIN")
            classes.append(c)
        return torch.tensor(classes, dtype=torch.long, device=self.device)

    def forward(self, batched_inputs):
        if not self.training:
            return self.inference(batched_inputs)
        image_features = self.image_features(batched_inputs)
        captions = [c for x in batched_inputs for c in x["captions"]]
        owner = torch.tensor([i for i, x in enumerate(batched_inputs) for _ in x["captions"]], dtype=torch.long, device=self.device)
        keys = [image_key(x.get("dataset", ""), x["image_id"]) for x in batched_inputs]
        caption_features = self.sentence_encoder(captions)
        losses = {}
        if self.loss_weight:
            losses.update(self._pair_losses(image_features, caption_features, owner, keys))
        if self.instance_loss is not None:
            classes = self.instance_classes(batched_inputs, keys)
            losses.update(self.instance_loss(image_features, caption_features, classes, classes[owner]))
        return losses

    def _pair_losses(self, image_features, caption_features, owner, keys) -> dict:
        """The ranking, logistic or InfoNCE loss on the normalized embeddings, times ``loss_weight``."""
        keys = torch.tensor(keys, dtype=torch.long, device=self.device)
        images, embedded = self._normalize_images(image_features), F.normalize(caption_features, dim=-1)
        if isinstance(self.loss, LogisticPairLoss):
            losses = self.loss(self.scorer, images, embedded, owner, keys)
        else:
            losses = self.loss(images, embedded, owner, keys)
        return losses if self.loss_weight == 1 else {k: self.loss_weight * v for k, v in losses.items()}

    @torch.no_grad()
    def inference(self, batched_inputs):
        images = self.embed_images(batched_inputs)
        captions = self.embed_caption_lists([x["captions"] for x in batched_inputs])
        return [{"image_embedding": img, "caption_embeddings": c} for img, c in zip(images, captions)]

    @property
    def needs_unused_parameters(self) -> bool:
        """DistributedDataParallel must tolerate parameters without gradients: a backbone that is
        frozen until an iteration gets none before it."""
        enc = self.image_encoder
        return self.uses_pixels and not enc.backbone_trainable and any(p.requires_grad for p in enc.backbone.parameters())
