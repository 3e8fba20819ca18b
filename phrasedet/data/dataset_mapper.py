"""``PhraseDatasetMapper``: a dataset dict (docs/DATA.md) -> the model's input.

Output keys, besides Detectron2's ``image`` (uint8 tensor, C x H x W), ``height``, ``width``:

- ``phrases``: list[str], P distinct normalized phrases the model is asked about. Training: at most
  ``INPUT.PHRASES.MAX_PER_IMAGE`` of them, sampled (uniform or IFS), plus PPA phrases if on.
  Test: every distinct ground-truth phrase of the image, or, when the mapper is given a
  list of ``test_phrases``, that whole list for every image (open-ended phrase detection).
- ``instances``: :class:`Instances` of every box-target occurrence (all of them, so the
  phrase-agnostic RPN learns every phrase box), in the transformed image:
  ``gt_boxes`` (N x 4, union boxes), ``gt_classes`` (N, zeros: one "phrase region" class) and
  ``gt_phrase_ids`` (N, index into ``phrases``, or -1 for a phrase not sampled this time).
  A PPA phrase adds a copy of each box of the phrase it augments.

No horizontal flip unless the config asks for one (``INPUT.RANDOM_FLIP``): phrases say "left".
"""
import copy
import logging

import numpy as np
import torch
from detectron2.config import configurable
from detectron2.data import MetadataCatalog
from detectron2.data import detection_utils as utils
from detectron2.data import transforms as T
from detectron2.structures import Boxes, Instances

from phrasedet.text.vocab import PhraseVocabulary

from .phrase_sampling import choose_phrases, sampling_weights
from .statistics import training_vocabulary
from .ppa import PositivePhraseAugmenter

__all__ = ["PhraseDatasetMapper"]

logger = logging.getLogger(__name__)


class PhraseDatasetMapper:
    """Map a phrase-grounding record to the inputs of a phrase-conditioned detector."""

    @configurable
    def __init__(
        self,
        is_train: bool,
        *,
        augmentations,
        image_format: str,
        max_phrases: int = 5,
        sampling: str = "uniform",
        ifs_weighting: str = "one_minus_share",
        vocabulary: PhraseVocabulary = None,
        augmenter: PositivePhraseAugmenter = None,
        ppa_per_phrase: int = 1,
        test_phrases: list = None,
    ):
        """
        Args:
            is_train: sample phrases (training) or keep them all (test).
            augmentations: Detectron2 augmentations applied to image and boxes.
            image_format: ``INPUT.FORMAT``.
            max_phrases: training phrases per image.
            sampling, ifs_weighting: see :func:`phrasedet.data.phrase_sampling.sampling_weights`.
            vocabulary: training counts, needed for IFS.
            augmenter: a :class:`PositivePhraseAugmenter`, or None for no PPA.
            ppa_per_phrase: augmented phrases offered per ground-truth phrase.
            test_phrases: test only: the phrases asked about in every image (``None``: the image's own).
        """
        if test_phrases is not None and is_train:
            raise ValueError("a fixed phrase vocabulary is for inference; training samples the image's phrases")
        if max_phrases < 1:
            raise ValueError(f"INPUT.PHRASES.MAX_PER_IMAGE must be >= 1, got {max_phrases}")
        if sampling == "ifs" and vocabulary is None:
            raise ValueError("INPUT.PHRASES.SAMPLING 'ifs' needs the training vocabulary")
        sampling_weights([1], sampling, ifs_weighting)  # validates both names now, not mid-epoch
        self.is_train = is_train
        self.augmentations = T.AugmentationList(augmentations)
        self.image_format = image_format
        self.max_phrases = max_phrases
        self.sampling = sampling
        self.ifs_weighting = ifs_weighting
        self.vocabulary = vocabulary
        self.augmenter = augmenter
        self.ppa_per_phrase = ppa_per_phrase
        self.test_phrases = list(test_phrases) if test_phrases is not None else None
        self._test_phrase_index = {p: i for i, p in enumerate(self.test_phrases or ())}
        logger.info(
            "PhraseDatasetMapper(%s): augmentations %s; %s", "train" if is_train else "test", augmentations,
            f"{max_phrases} phrases per image, {sampling} sampling, PPA {'on' if augmenter else 'off'}"
            if is_train else "all phrases of each image",
        )

    @classmethod
    def from_config(cls, cfg, is_train: bool = True, test_phrases=None):
        p = cfg.INPUT.PHRASES
        needs_vocab = is_train and (p.SAMPLING == "ifs" or p.PPA)
        vocab = training_vocabulary(cfg.DATASETS.TRAIN, cfg.PHRASEDET.VOCAB.BUCKET_THRESHOLDS) if needs_vocab else None
        augmenter = None
        if is_train and p.PPA:
            style = MetadataCatalog.get(cfg.DATASETS.TRAIN[0]).get("phrase_style", "flickr")
            augmenter = PositivePhraseAugmenter(vocab.phrases(), style=style)
        return {
            "is_train": is_train,
            "augmentations": utils.build_augmentation(cfg, is_train),
            "image_format": cfg.INPUT.FORMAT,
            "max_phrases": p.MAX_PER_IMAGE,
            "sampling": p.SAMPLING,
            "ifs_weighting": p.IFS_WEIGHTING,
            "vocabulary": vocab,
            "augmenter": augmenter,
            "ppa_per_phrase": p.PPA_PER_PHRASE,
            "test_phrases": test_phrases,
        }

    def _count(self, phrase):
        return self.vocabulary.count(phrase) if self.vocabulary is not None else 1

    def _augmented(self, gt_phrases):
        """gt phrase -> up to ``ppa_per_phrase`` augmented phrases (random, not already in the image)."""
        taken, out = set(gt_phrases), {}
        for p in gt_phrases:
            options = [a for a in self.augmenter(p) if a not in taken]
            if options:
                k = min(self.ppa_per_phrase, len(options))
                out[p] = [options[i] for i in sorted(np.random.choice(len(options), k, replace=False))]
                taken.update(out[p])
        return out

    def select_phrases(self, gt_phrases):
        """Phrases asked about for an image with distinct ground-truth phrases ``gt_phrases``.

        Returns:
            (phrases, source): ``source[a]`` is the ground-truth phrase an augmented phrase ``a`` came from.
        """
        if not self.is_train:
            return (self.test_phrases if self.test_phrases is not None else list(gt_phrases)), {}
        aug = self._augmented(gt_phrases) if self.augmenter is not None else {}
        source = {a: p for p, alts in aug.items() for a in alts}
        chosen_gt, chosen_aug = choose_phrases(
            gt_phrases, list(source), self.max_phrases, self._count, np.random, self.sampling, self.ifs_weighting
        )
        return chosen_gt + chosen_aug, {a: source[a] for a in chosen_aug}

    @staticmethod
    def _instances(annotations, index, source, transforms, image_size):
        boxes = np.asarray([a["bbox"] for a in annotations], dtype=np.float64).reshape(-1, 4)
        boxes = transforms.apply_box(boxes) if len(boxes) else boxes
        ids = [index.get(a["phrase"], -1) for a in annotations]
        copies = [(k, index[aug]) for aug, gt in source.items() for k, a in enumerate(annotations) if a["phrase"] == gt]
        if copies:
            boxes = np.concatenate([boxes, boxes[[k for k, _ in copies]]])
            ids += [i for _, i in copies]
        inst = Instances(image_size)
        inst.gt_boxes = Boxes(torch.as_tensor(boxes, dtype=torch.float32))
        inst.gt_boxes.clip(image_size)
        inst.gt_classes = torch.zeros(len(ids), dtype=torch.int64)
        inst.gt_phrase_ids = torch.as_tensor(ids, dtype=torch.int64)
        return inst

    def __call__(self, dataset_dict):
        d = copy.deepcopy(dataset_dict)
        image = utils.read_image(d["file_name"], format=self.image_format)
        utils.check_image_size(d, image)
        aug_input = T.AugInput(image)
        transforms = self.augmentations(aug_input)
        image = aug_input.image
        image_size = image.shape[:2]
        d["image"] = torch.as_tensor(np.ascontiguousarray(image.transpose(2, 0, 1)))
        annotations = d.pop("annotations", [])
        d.pop("unboxed_phrases", None)
        gt_phrases = list(dict.fromkeys(a["phrase"] for a in annotations))
        phrases, source = self.select_phrases(gt_phrases)
        d["phrases"] = phrases
        index = self._test_phrase_index if phrases is self.test_phrases else {p: i for i, p in enumerate(phrases)}
        d["instances"] = self._instances(annotations, index, source, transforms, image_size)
        return d
