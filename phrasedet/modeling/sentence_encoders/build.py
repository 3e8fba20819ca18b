"""``SENTENCE_ENCODER_REGISTRY``: caption strings -> sentence vectors, chosen by
``MODEL.RETRIEVAL.SENTENCE_ENCODER``.

An encoder is an ``nn.Module`` called with a list of C caption strings (as written in the
dataset) that returns [C, MODEL.RETRIEVAL.EMBED_DIM] (not normalized: the meta-architecture
L2-normalizes). Tokenization, vocabularies and word vectors come from :mod:`phrasedet.text`.
"""
from detectron2.data import DatasetCatalog
from fvcore.common.registry import Registry

__all__ = ["SENTENCE_ENCODER_REGISTRY", "build_sentence_encoder", "training_captions", "fingerprint_value",
           "check_fingerprint"]

SENTENCE_ENCODER_REGISTRY = Registry("SENTENCE_ENCODER")
SENTENCE_ENCODER_REGISTRY.__doc__ = """Sentence encoders by class name; each is built as ``cls(cfg)``."""


def build_sentence_encoder(cfg):
    """The encoder named by ``cfg.MODEL.RETRIEVAL.SENTENCE_ENCODER``."""
    return SENTENCE_ENCODER_REGISTRY.get(cfg.MODEL.RETRIEVAL.SENTENCE_ENCODER)(cfg)


def training_captions(cfg, who: str) -> list:
    """Every caption of every ``DATASETS.TRAIN`` split, in dataset order (vocabularies and encoder
    caches are built from these, never from a test split)."""
    if not cfg.DATASETS.TRAIN:
        raise ValueError(f"{who} builds its vocabulary from the captions of DATASETS.TRAIN, which is empty")
    return [c for name in cfg.DATASETS.TRAIN for record in DatasetCatalog.get(name) for c in record.get("captions", ())]


def fingerprint_value(hex_digest: str) -> int:
    """The first 15 hex digits of a fingerprint as an int (fits in an int64 buffer)."""
    return int(hex_digest[:15], 16)


def check_fingerprint(state_dict: dict, key: str, expected, what: str) -> None:
    """Raise when a checkpoint's fingerprint buffer ``state_dict[key]`` differs from ``expected``
    (a one-element tensor): the checkpoint was trained with other words (``what`` says how to fix it)."""
    if key in state_dict and int(state_dict[key].reshape(-1)[0]) != int(expected.reshape(-1)[0]):
        raise ValueError(f"{key}: the checkpoint was trained with other words than {what}")
