"""``NegativePhraseHook``: builds and refreshes the hard-negative phrase table of negative phrase
augmentation (``MODEL.PHRASE_ROI_HEADS.NPA``; :mod:`phrasedet.modeling.roi_heads.negative_phrases`).

Before the first step and then every ``PERIOD`` iterations (before the steps ``PERIOD``,
``2 PERIOD``, ...), the model, in eval mode, scores every training phrase on the ground-truth
boxes of ``REFRESH_IMAGES`` training images (test-time resizing; the model's own region features
of the boxes as proposals; the classifier's ``encode_phrases`` once for the vocabulary, then
``score_encoded``); a phrase's row ranks the vocabulary by the mean logit over its regions. Train
mode is restored afterwards.

Determinism: the refreshed images are ``randperm`` of a generator seeded from ``(SEED,
NPA_RNG_KEY, iteration)``, and no global RNG is drawn from. The table goes into the trainer's
checkpoints (key ``negative_phrases``), so ``--resume`` continues with the table the interrupted
run had, and refreshes at the same iterations.
"""
import logging
import time

import torch
from detectron2.engine import HookBase

from phrasedet.data import PhraseDatasetMapper
from phrasedet.data.train_stream import derived_seed
from phrasedet.modeling.roi_heads.negative_phrases import (NegativePhraseTable, WordNetHypernyms, coannotated_pairs,
                                                           hypernym_pairs)
from phrasedet.text.vocab import PhraseVocabulary

__all__ = ["NegativePhraseHook", "NPA_CHECKPOINT_KEY", "ground_truth_scores"]

logger = logging.getLogger("phrasedet.engine")

NPA_CHECKPOINT_KEY = "negative_phrases"
#: Second key of the refresh's image-choice seeds (the data stream uses (seed, position), the model 1).
NPA_RNG_KEY = 2
SCORING_BATCH = 4  # images per backbone forward in a refresh


@torch.no_grad()
def _ground_truth_regions(model, batch) -> list:
    """Per input, the region features [N_i, D] of its ground-truth boxes: looked up in the model's
    region cache when it has one (stage 3 on a frozen detector), else computed by the detector."""
    if getattr(model, "region_cache", None) is not None:
        return [c.gt_region_features(x["instances"].gt_boxes.tensor, model.device)
                for c, x in zip(model.region_cache.lookup(batch), batch)]
    images = model.preprocess_image(batch)
    features = model.backbone(images.tensor)
    boxes = [x["instances"].gt_boxes.to(model.device) for x in batch]
    return model.roi_heads.region_features(features, boxes, images.image_sizes).split([len(b) for b in boxes])


def ground_truth_scores(model, inputs, vocabulary):
    """How strongly ``model`` scores each vocabulary phrase on each phrase's ground-truth regions.

    Args:
        model: a :class:`PhraseRCNN` (in eval mode) whose classifier has ``encode_phrases`` and
            ``score_encoded``.
        inputs: test-mapped inputs (``image``, ``phrases`` = the image's ground-truth phrases,
            ``instances.gt_boxes``/``gt_phrase_ids`` in the resized image).
        vocabulary: list of V candidate phrases.

    Returns:
        (phrases, scores): the S ground-truth phrases seen (sorted) and [S, V] mean logits of
        every candidate over their regions.
    """
    heads = model.roi_heads
    clf = heads.classifier
    if not (hasattr(clf, "encode_phrases") and hasattr(clf, "score_encoded")):
        raise ValueError(f"negative phrase augmentation scores with encode_phrases/score_encoded, which {type(clf).__name__} lacks")
    codes = clf.encode_phrases(model.phrase_bank(vocabulary))
    sums, counts = {}, {}
    for start in range(0, len(inputs), SCORING_BATCH):
        batch = inputs[start:start + SCORING_BATCH]
        regions = _ground_truth_regions(model, batch)
        for x, r in zip(batch, regions):
            if len(r) == 0:
                continue
            logits = clf.score_encoded(r, codes)  # [V, N]
            ids = x["instances"].gt_phrase_ids.to(logits.device)
            for j, phrase in enumerate(x["phrases"]):
                cols = ids == j
                if cols.any():
                    sums[phrase] = sums.get(phrase, 0) + logits[:, cols].sum(dim=1).cpu()
                    counts[phrase] = counts.get(phrase, 0) + int(cols.sum())
    phrases = sorted(sums)
    scores = torch.stack([sums[p] / counts[p] for p in phrases]) if phrases else torch.zeros((0, len(vocabulary)))
    return phrases, scores


class NegativePhraseHook(HookBase):
    """Build ``model.negative_phrases`` before the first step and every ``PERIOD`` iterations.

    Args:
        cfg: the training config (``MODEL.PHRASE_ROI_HEADS.NPA``, ``SEED``).
        records: the training records (their phrases are the candidates; the co-annotation
            filter counts their boxes; refreshes score their images).
        hypernyms: ``word -> set of hypernyms`` for the WordNet filter (default: nltk's WordNet,
            loaded now when ``WORDNET_FILTER``).
    """

    def __init__(self, cfg, records, hypernyms=None):
        npa = cfg.MODEL.PHRASE_ROI_HEADS.NPA
        for key in ("TABLE_SIZE", "PERIOD", "MIN_COOCCURRENCE"):
            if npa[key] < 1:
                raise ValueError(f"MODEL.PHRASE_ROI_HEADS.NPA.{key} must be >= 1, got {npa[key]}")
        if npa.REFRESH_IMAGES < 0:
            raise ValueError(f"MODEL.PHRASE_ROI_HEADS.NPA.REFRESH_IMAGES must be >= 0 (0 = all), got {npa.REFRESH_IMAGES}")
        self.records = list(records)
        if not self.records:
            raise ValueError("negative phrase augmentation needs training records")
        self.period, self.table_size, self.refresh_images = npa.PERIOD, npa.TABLE_SIZE, npa.REFRESH_IMAGES
        self.seed = cfg.SEED
        self.mapper = PhraseDatasetMapper(cfg, is_train=False)
        self.vocabulary = PhraseVocabulary.from_dataset_dicts(self.records).phrases()
        self.excluded = coannotated_pairs(self.records, npa.MIN_COOCCURRENCE)
        n_coannotated = len(self.excluded)
        if npa.WORDNET_FILTER:
            self.excluded |= hypernym_pairs(self.vocabulary, hypernyms if hypernyms is not None else WordNetHypernyms())
        logger.info("NPA: %d candidate phrases; %d pairs excluded as false negatives (%d co-annotated, %s)",
                    len(self.vocabulary), len(self.excluded), n_coannotated,
                    "the rest WordNet parent-child" if npa.WORDNET_FILTER else "WordNet filter off")
        self.built_at = None
        self.refreshes = []  # (iteration, seconds) of every refresh this process ran

    def _model(self):
        return getattr(self.trainer.model, "module", self.trainer.model)

    def _image_indices(self, iteration: int) -> list:
        n = len(self.records)
        if self.refresh_images == 0 or self.refresh_images >= n:
            return list(range(n))
        generator = None
        if self.seed >= 0:
            generator = torch.Generator()
            generator.manual_seed(derived_seed(self.seed, NPA_RNG_KEY, iteration))
        return sorted(torch.randperm(n, generator=generator)[:self.refresh_images].tolist())

    def build_table(self, model, iteration: int) -> NegativePhraseTable:
        """The table of ``model`` (eval mode meanwhile) on the images chosen for ``iteration``."""
        inputs = [self.mapper(self.records[i]) for i in self._image_indices(iteration)]
        was_training = model.training
        model.eval()
        try:
            phrases, scores = ground_truth_scores(model, inputs, self.vocabulary)
        finally:
            model.train(was_training)
        return NegativePhraseTable.from_scores(phrases, self.vocabulary, scores, self.table_size, self.excluded)

    def refresh(self, iteration: int) -> None:
        start = time.perf_counter()
        model = self._model()
        model.negative_phrases = self.build_table(model, iteration)
        self.built_at = iteration
        seconds = time.perf_counter() - start
        self.refreshes.append((iteration, seconds))
        logger.info("NPA: negative phrase table built at iteration %d: %d phrases with hard negatives, %.2f s",
                    iteration, len(model.negative_phrases), seconds)

    def before_step(self):
        it = self.trainer.iter
        if self._model().negative_phrases is None or (it % self.period == 0 and self.built_at != it):
            self.refresh(it)

    # the trainer's checkpointer saves and restores the table (--resume)
    def state_dict(self) -> dict:
        table = self._model().negative_phrases
        return {} if table is None else {"built_at": self.built_at, **table.state_dict()}

    def load_state_dict(self, state) -> None:
        if state:
            self._model().negative_phrases = NegativePhraseTable.from_state_dict(state)
            self.built_at = state["built_at"]
