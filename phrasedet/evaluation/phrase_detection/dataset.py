"""The registered datasets an evaluation reads: the test split and the split defining buckets."""
from typing import Optional, Tuple

from detectron2.data import DatasetCatalog, MetadataCatalog

from .ground_truth import PhraseGroundTruth

__all__ = ["train_dataset_of", "load_test_split"]


def train_dataset_of(dataset_name: str, train_dataset: Optional[str] = None) -> str:
    """Name of the training split whose instance counts define the zero/few/common buckets of
    ``dataset_name``: ``train_dataset`` when given, else the ``train_dataset`` field of the test
    split's metadata (every phrasedet dataset has one)."""
    if train_dataset:
        return train_dataset
    name = getattr(MetadataCatalog.get(dataset_name), "train_dataset", None)
    if not name:
        raise ValueError(
            f"dataset {dataset_name!r} has no 'train_dataset' in its MetadataCatalog entry: set it "
            f"(MetadataCatalog.get({dataset_name!r}).train_dataset = '<training split>') or pass "
            f"train_dataset=...; it defines the zero/few/common-shot buckets")
    return name


def load_test_split(dataset_name: str) -> Tuple[list, PhraseGroundTruth]:
    """Dataset dicts of ``dataset_name`` and their ground truth over :func:`test_vocabulary`."""
    dicts = DatasetCatalog.get(dataset_name)
    return dicts, PhraseGroundTruth.from_dataset_dicts(dicts)
