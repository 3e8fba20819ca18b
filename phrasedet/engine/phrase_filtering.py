"""Build a phrase filter (paper 003 Sec. 6.2, Table VI) with a trained image-sentence retrieval model.

For each test image of a phrase-detection split, the retrieval model (an ``ImageTextEmbedding`` of
``configs/retrieval/``, ``TEST.PHRASE_FILTER.RETRIEVAL_CONFIG`` + ``RETRIEVAL_WEIGHTS``) ranks every
caption of its config's ``DATASETS.TRAIN`` splits (the sentence database); the tokens of the top
``TEST.PHRASE_FILTER.TOP_N`` captions are the image's allowed tokens
(:class:`~phrasedet.evaluation.PhraseFilter` has the rule). The captions are embedded once, in
batches; each test image is embedded once (its own captions are never read); scores are the
model's :attr:`scorer` (cosine: a matrix product of the normalized embeddings; paper 000's
similarity network otherwise). The filter is saved as
``<OUTPUT_DIR>/inference/<dataset>/phrase_filter.json``; ``TEST.PHRASE_FILTER.FILE`` loads a saved
one instead.

A retrieval model trained on precomputed features (``MODEL.RETRIEVAL.IMAGE_INPUT "features"``,
e.g. the models of ``tools/compare/compare_retrieval.py``) runs here on pixels: the features were the
pooled features of a pixel encoder's frozen backbone, so the pixel path with that backbone gives
the same embedding without a features file for the test split. The backbone is
``MODEL.RETRIEVAL.BACKBONE_WEIGHTS`` (the CNN the features were extracted with, e.g. the
recipe's ``stage1_detector/model_final.pth``), else the ``extractor.pth`` that
``tools/data/extract_image_features.py`` wrote into ``MODEL.RETRIEVAL.IMAGE_FEATURES_DIR``; the
checkpoint is then loaded without its backbone tensors (it has none). The image inputs
(``INPUT.RETRIEVAL``, ``INPUT.FORMAT``, pixel mean and std) must be those of the extraction.
"""
import logging
import os
import time
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog
from detectron2.modeling import build_model

from phrasedet.config import add_phrasedet_config
from phrasedet.data import CaptionDatasetMapper
from phrasedet.evaluation import PhraseFilter
from phrasedet.evaluation.phrase_detection.phrase_filter import caption_tokens
from phrasedet.modeling.sentence_encoders import training_captions
from phrasedet.paths import resolve_data_path

from .staged.model_surgery import load_weights

__all__ = ["PHRASE_FILTER_FILE", "random_phrase_filter", "phrase_filter_enabled", "check_phrase_filter_config", "retrieval_config",
           "build_retrieval_model", "sentence_database", "top_n_indices", "build_phrase_filter"]

logger = logging.getLogger("phrasedet.engine")

PHRASE_FILTER_FILE = "phrase_filter.json"
# Captions embedded per call of ``embed_captions``.
CAPTION_BATCH = 1024
_BACKBONE_PREFIX = "image_encoder.backbone."


def phrase_filter_enabled(cfg) -> bool:
    """Whether ``TEST.PHRASE_FILTER`` asks for a filter (``RETRIEVAL_WEIGHTS`` or ``FILE`` set)."""
    f = cfg.TEST.PHRASE_FILTER
    return bool(f.RETRIEVAL_WEIGHTS or f.FILE)


def check_phrase_filter_config(cfg) -> None:
    """Fail early (before inference) on a missing file or a bad value of ``TEST.PHRASE_FILTER``;
    errors name the config key."""
    f = cfg.TEST.PHRASE_FILTER
    if f.TOP_N < 1:
        raise ValueError(f"TEST.PHRASE_FILTER.TOP_N must be >= 1, got {f.TOP_N}")
    if f.FILE:
        if not os.path.isfile(f.FILE):
            raise FileNotFoundError(f"TEST.PHRASE_FILTER.FILE: no file {f.FILE!r}")
        return
    if not f.RETRIEVAL_WEIGHTS:
        return
    if not os.path.isfile(f.RETRIEVAL_WEIGHTS):
        raise FileNotFoundError(f"TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS: no file {f.RETRIEVAL_WEIGHTS!r}")
    if not f.RETRIEVAL_CONFIG:
        raise ValueError("TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS is set but TEST.PHRASE_FILTER.RETRIEVAL_CONFIG is not: "
                         "name the retrieval model's config (a yaml of configs/retrieval/ or its run's config.yaml)")
    if not os.path.isfile(f.RETRIEVAL_CONFIG):
        raise FileNotFoundError(f"TEST.PHRASE_FILTER.RETRIEVAL_CONFIG: no file {f.RETRIEVAL_CONFIG!r}")
    if len(f.RETRIEVAL_OPTS) % 2:
        raise ValueError(f"TEST.PHRASE_FILTER.RETRIEVAL_OPTS must be KEY VALUE pairs, got {list(f.RETRIEVAL_OPTS)}")


def _extraction_backbone(rcfg) -> str:
    """The CNN of a features model: ``MODEL.RETRIEVAL.BACKBONE_WEIGHTS``, else the features
    directory's ``extractor.pth``."""
    r = rcfg.MODEL.RETRIEVAL
    if r.BACKBONE_WEIGHTS:
        if not os.path.isfile(r.BACKBONE_WEIGHTS):
            raise FileNotFoundError(f"MODEL.RETRIEVAL.BACKBONE_WEIGHTS of TEST.PHRASE_FILTER.RETRIEVAL_CONFIG: "
                                    f"no file {r.BACKBONE_WEIGHTS!r}")
        return r.BACKBONE_WEIGHTS
    features_dir = resolve_data_path(r.IMAGE_FEATURES_DIR, "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR") if r.IMAGE_FEATURES_DIR else ""
    extractor = os.path.join(features_dir, "extractor.pth") if features_dir else ""
    if extractor and os.path.isfile(extractor):
        logger.info("Phrase filter: the retrieval model was trained on features; its CNN is the extractor's (%s)", extractor)
        return extractor
    raise ValueError("TEST.PHRASE_FILTER.RETRIEVAL_CONFIG has MODEL.RETRIEVAL.IMAGE_INPUT 'features': the filter runs the "
                     "model on pixels and needs the CNN the features were extracted with; set MODEL.RETRIEVAL.BACKBONE_WEIGHTS "
                     "(e.g. through TEST.PHRASE_FILTER.RETRIEVAL_OPTS) or keep the features directory's extractor.pth")


def retrieval_config(cfg):
    """The retrieval model's config: ``get_cfg`` + phrasedet's keys + ``RETRIEVAL_CONFIG`` +
    ``RETRIEVAL_OPTS``, on ``cfg.MODEL.DEVICE``; a features model is switched to pixels with its
    extraction CNN as ``BACKBONE_WEIGHTS`` (module docstring). Returns ``(config, from_features)``."""
    f = cfg.TEST.PHRASE_FILTER
    rcfg = get_cfg()
    add_phrasedet_config(rcfg)
    rcfg.merge_from_file(f.RETRIEVAL_CONFIG)
    rcfg.merge_from_list(list(f.RETRIEVAL_OPTS))
    if rcfg.MODEL.META_ARCHITECTURE != "ImageTextEmbedding":
        raise ValueError(f"TEST.PHRASE_FILTER.RETRIEVAL_CONFIG {f.RETRIEVAL_CONFIG!r}: MODEL.META_ARCHITECTURE is "
                         f"{rcfg.MODEL.META_ARCHITECTURE!r}, the filter needs an ImageTextEmbedding (configs/retrieval/)")
    if not rcfg.DATASETS.TRAIN:
        raise ValueError(f"TEST.PHRASE_FILTER.RETRIEVAL_CONFIG {f.RETRIEVAL_CONFIG!r}: DATASETS.TRAIN (the sentence "
                         "database) is empty")
    rcfg.MODEL.DEVICE = cfg.MODEL.DEVICE
    rcfg.MODEL.WEIGHTS = ""
    from_features = rcfg.MODEL.RETRIEVAL.IMAGE_INPUT == "features"
    if from_features:
        rcfg.MODEL.RETRIEVAL.BACKBONE_WEIGHTS = _extraction_backbone(rcfg)
        rcfg.MODEL.RETRIEVAL.IMAGE_INPUT = "pixels"
        rcfg.MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS = -1
    rcfg.freeze()
    return rcfg, from_features


def _load_weights(model, path: str, skip_backbone: bool) -> None:
    """Load checkpoint ``path`` into ``model``, requiring every tensor of the model (but the
    backbone's when ``skip_backbone``: it came from ``BACKBONE_WEIGHTS``) and nothing else."""
    skip = (_BACKBONE_PREFIX,) if skip_backbone else ()
    try:
        load_weights(model, path, drop=skip, may_miss=skip)
    except ValueError as e:
        hint = (" (a model trained on pixels with the backbone untouched: set MODEL.RETRIEVAL.BACKBONE_WEIGHTS through "
                "TEST.PHRASE_FILTER.RETRIEVAL_OPTS)" if f"'{_BACKBONE_PREFIX}" in str(e) else "")
        raise ValueError(f"TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS does not fit TEST.PHRASE_FILTER.RETRIEVAL_CONFIG: {e}{hint}") from None


def build_retrieval_model(rcfg, weights: str, skip_backbone: bool = False):
    """The retrieval model of ``rcfg`` with ``weights`` loaded, in eval mode."""
    model = build_model(rcfg)
    _load_weights(model, weights, skip_backbone)
    return model.eval()


def sentence_database(rcfg) -> List[str]:
    """Every caption of the retrieval config's ``DATASETS.TRAIN`` splits, in dataset order (the
    indices saved in the filter)."""
    return training_captions(rcfg, "TEST.PHRASE_FILTER.RETRIEVAL_CONFIG")


def top_n_indices(scores: np.ndarray, n: int) -> np.ndarray:
    """[B, C] scores -> [B, min(n, C)] indices of the best, best first; equal scores by index
    (deterministic, without sorting all C scores)."""
    B, C = scores.shape
    n = min(int(n), C)
    out = np.empty((B, n), dtype=np.int64)
    for b, row in enumerate(scores):
        threshold = np.partition(row, C - n)[C - n] if n else np.inf
        candidates = np.flatnonzero(row >= threshold)
        out[b] = candidates[np.lexsort((candidates, -row[candidates]))[:n]]
    return out


class _Mapped(torch.utils.data.Dataset):
    def __init__(self, records, mapper):
        self.records, self.mapper = records, mapper

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        return self.mapper(self.records[i])


@torch.no_grad()
def _embed_captions(model, captions: List[str], batch: int = CAPTION_BATCH) -> torch.Tensor:
    chunks = [model.embed_captions(captions[a:a + batch]) for a in range(0, len(captions), batch)]
    return torch.cat(chunks) if chunks else torch.zeros((0, 0), device=model.device)


@torch.no_grad()
def retrieve(model, rcfg, records, captions: List[str], top_n: int) -> Tuple[np.ndarray, dict]:
    """``[N, top_n]`` indices of the best captions of each record's image, and timings.

    The captions are embedded once; each image once (batches of ``TEST.RETRIEVAL.IMS_PER_BATCH``
    of the retrieval config; the retrieval mapper never sees the test captions)."""
    t0 = time.perf_counter()
    caption_emb = _embed_captions(model, captions)
    t_captions = time.perf_counter() - t0
    inputs = [{"file_name": r["file_name"], "image_id": r["image_id"], "height": r["height"], "width": r["width"],
               "captions": []} for r in records]
    loader = torch.utils.data.DataLoader(_Mapped(inputs, CaptionDatasetMapper(rcfg, is_train=False)),
                                         batch_size=max(1, rcfg.TEST.RETRIEVAL.IMS_PER_BATCH), shuffle=False,
                                         num_workers=rcfg.DATALOADER.NUM_WORKERS, collate_fn=list)
    rows = []
    t1 = time.perf_counter()
    for batch in loader:
        images = model.embed_images(batch)
        scores = model.scorer.pairwise(images, caption_emb).float().cpu().numpy()
        rows.append(top_n_indices(scores, top_n))
    t_images = time.perf_counter() - t1
    retrieved = np.concatenate(rows) if rows else np.zeros((0, min(top_n, len(captions))), np.int64)
    return retrieved, {"caption_seconds": t_captions, "image_seconds": t_images}


def _default_output(cfg, dataset_name: str) -> str:
    return os.path.join(cfg.OUTPUT_DIR, "inference", dataset_name, PHRASE_FILTER_FILE)


def build_phrase_filter(cfg, dataset_name: str, output_path: Optional[str] = None) -> PhraseFilter:
    """The phrase filter of test split ``dataset_name`` (module docstring).

    ``TEST.PHRASE_FILTER.FILE`` is loaded when set; otherwise the retrieval model runs and the
    filter is saved to ``output_path`` (default ``<OUTPUT_DIR>/inference/<dataset>/phrase_filter.json``;
    ``""``: not saved).
    """
    check_phrase_filter_config(cfg)
    f = cfg.TEST.PHRASE_FILTER
    if f.FILE:
        phrase_filter = PhraseFilter.load(f.FILE)
        if phrase_filter.top_n != f.TOP_N:
            logger.warning("TEST.PHRASE_FILTER.FILE %s was built with the top %s sentences, TEST.PHRASE_FILTER.TOP_N "
                           "is %d: using the file's", f.FILE, phrase_filter.top_n, f.TOP_N)
        logger.info("Phrase filter of %s loaded from %s (%d images)", dataset_name, f.FILE, len(phrase_filter))
        return phrase_filter
    if not f.RETRIEVAL_WEIGHTS:
        raise ValueError("no phrase filter configured: set TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS (with RETRIEVAL_CONFIG) "
                         "or TEST.PHRASE_FILTER.FILE")
    t0 = time.perf_counter()
    rcfg, from_features = retrieval_config(cfg)
    model = build_retrieval_model(rcfg, f.RETRIEVAL_WEIGHTS, skip_backbone=from_features)
    captions = sentence_database(rcfg)
    if not captions:
        raise ValueError(f"TEST.PHRASE_FILTER.RETRIEVAL_CONFIG: DATASETS.TRAIN {list(rcfg.DATASETS.TRAIN)} has no captions")
    if f.TOP_N > len(captions):
        logger.warning("TEST.PHRASE_FILTER.TOP_N %d is more than the %d sentences of %s: every sentence is retrieved",
                       f.TOP_N, len(captions), list(rcfg.DATASETS.TRAIN))
    t_build = time.perf_counter() - t0
    records = DatasetCatalog.get(dataset_name)
    retrieved, times = retrieve(model, rcfg, records, captions, f.TOP_N)
    description = {"config": f.RETRIEVAL_CONFIG, "weights": f.RETRIEVAL_WEIGHTS,
                   "backbone_weights": rcfg.MODEL.RETRIEVAL.BACKBONE_WEIGHTS, "from_features": from_features,
                   "score": rcfg.MODEL.RETRIEVAL.SCORE, "sentence_datasets": list(rcfg.DATASETS.TRAIN),
                   "num_sentences": len(captions), "caption_seconds": round(times["caption_seconds"], 3),
                   "seconds_per_image": round(times["image_seconds"] / max(1, len(records)), 5)}
    phrase_filter = PhraseFilter.from_retrieved([str(r["image_id"]) for r in records], retrieved, captions, f.TOP_N,
                                                retrieval_model=description)
    n = max(1, len(records))
    logger.info("Phrase filter of %s: top %d of %d sentences (%s) for %d images; model built in %.1f s, sentences "
                "embedded in %.1f s, %.1f ms per test image, %.1f allowed tokens per image on average",
                dataset_name, min(f.TOP_N, len(captions)), len(captions), ", ".join(rcfg.DATASETS.TRAIN), len(records),
                t_build, times["caption_seconds"], 1000.0 * times["image_seconds"] / n,
                phrase_filter.mean_tokens())
    path = _default_output(cfg, dataset_name) if output_path is None else output_path
    if path:
        phrase_filter.save(path)
        logger.info("Saved the phrase filter of %s to %s", dataset_name, path)
    return phrase_filter


def random_phrase_filter(cfg, image_ids: Sequence[str], seed: int = 0) -> Tuple[PhraseFilter, int]:
    """The filtering rule's baseline: for each image, ``TEST.PHRASE_FILTER.TOP_N`` sentences of the
    retrieval config's sentence database drawn at random (without replacement; ``seed``) instead of
    retrieved. What the rule keeps with them is what it keeps with no knowledge of the image: a
    filter that keeps as much is not selective because of its model. Returns (filter, number of
    distinct tokens in the sentence database)."""
    rcfg, _ = retrieval_config(cfg)
    captions = sentence_database(rcfg)
    top_n = min(cfg.TEST.PHRASE_FILTER.TOP_N, len(captions))
    rng = np.random.default_rng(seed)
    rows = [rng.choice(len(captions), top_n, replace=False) for _ in image_ids]
    vocabulary = set().union(*(caption_tokens(c) for c in captions))
    return PhraseFilter.from_retrieved(list(image_ids), rows, captions, top_n, retrieval_model=f"random (seed {seed})"), \
        len(vocabulary)

