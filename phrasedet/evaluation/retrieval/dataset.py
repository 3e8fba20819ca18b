"""The registered test split a retrieval evaluation reads: image ids and caption counts."""
from typing import List, Tuple

import numpy as np
from detectron2.data import DatasetCatalog

__all__ = ["caption_to_image_of", "load_retrieval_split"]


def load_retrieval_split(dataset_name: str) -> Tuple[List[str], np.ndarray]:
    """``(image_ids [N], caption_counts int64 [N])`` of the records of ``dataset_name`` in dataset
    order (``DatasetCatalog.get``). Each record needs ``image_id`` and ``captions`` (a list, possibly
    empty); ValueError naming the dataset and record otherwise, or a repeated image id."""
    records = DatasetCatalog.get(dataset_name)
    image_ids, counts, seen = [], [], {}
    for n, record in enumerate(records):
        for key in ("image_id", "captions"):
            if key not in record:
                raise ValueError(f"dataset {dataset_name!r}: record {n}: no key {key!r} (a retrieval split needs "
                                 f"'image_id' and 'captions')")
        image_id = str(record["image_id"])
        if image_id in seen:
            raise ValueError(f"dataset {dataset_name!r}: image_id {image_id!r} is in records {seen[image_id]} and {n}")
        if not isinstance(record["captions"], (list, tuple)):
            raise ValueError(f"dataset {dataset_name!r}: record {n} (image_id {image_id!r}): 'captions' must be a "
                             f"list, got {type(record['captions']).__name__}")
        seen[image_id] = n
        image_ids.append(image_id)
        counts.append(len(record["captions"]))
    return image_ids, np.asarray(counts, dtype=np.int64)


def caption_to_image_of(caption_counts) -> np.ndarray:
    """Image of each caption [M] when the captions are listed image by image in record order:
    counts ``[1, 3, 0]`` -> ``[0, 1, 1, 1]``."""
    counts = np.asarray(caption_counts, dtype=np.int64)
    return np.repeat(np.arange(len(counts), dtype=np.int64), counts)
