"""Precomputed image features: one row per image in a ``.npy`` file, instead of pixels.

Users of VSE++ and of paper 000's code mostly train on CNN features computed once. A split's
features live in ``<features_dir>/<dataset name>.npy`` ([N, F], rows in the split's record order)
with an optional ``<dataset name>.txt`` listing the image id of each row (checked when present);
``tools/data/extract_image_features.py`` writes both. :func:`attach_image_features` gives each record
``feature_file`` and ``feature_row``, which :class:`~phrasedet.data.CaptionDatasetMapper` reads.
Datasets whose records carry these keys already (VSE++'s precomputed release) are left as they are.
"""
import os
from functools import lru_cache

import numpy as np

from phrasedet.fileio import load_array_file, read_text_lines
from phrasedet.paths import resolve_data_path

from .datasets.common import BadAnnotationError

__all__ = ["STORED_IMAGE_INPUTS", "features_path", "attach_image_features", "read_feature_row", "feature_dim",
           "write_image_features", "stored_image_input", "stored_image"]

#: ``MODEL.RETRIEVAL.IMAGE_INPUT`` values read from IMAGE_FEATURES_DIR instead of pixels.
STORED_IMAGE_INPUTS = ("features", "maps")


def stored_image_input(cfg) -> bool:
    """Whether the config's model reads precomputed rows (pooled features or maps) instead of pixels."""
    return cfg.MODEL.RETRIEVAL.IMAGE_INPUT in STORED_IMAGE_INPUTS


def stored_image(record: dict):
    """The precomputed row of a record (:func:`attach_image_features`) as a float32 tensor ([F] or [C, h, w]).

    Raises:
        KeyError: naming the image when its record carries no ``feature_file``.
    """
    import torch

    if "feature_file" not in record:
        raise KeyError(f"image {record.get('image_id')!r} has no precomputed feature (no 'feature_file' in its record)")
    return torch.from_numpy(read_feature_row(record["feature_file"], record["feature_row"]))


def features_path(features_dir: str, dataset_name: str) -> str:
    """``<features_dir>/<dataset_name>.npy``."""
    return os.path.join(os.path.expanduser(features_dir), f"{dataset_name}.npy")


@lru_cache(maxsize=32)
def _open(path: str) -> np.ndarray:
    """The memory-mapped [images, dims] (pooled features) or [images, C, h, w] (pre-pooling maps)
    array of numbers of a features file.

    Raises:
        FileNotFoundError: naming the file and the tool that writes it.
        BadAnnotationError: naming the file, for a file numpy cannot read (a ``.npz`` archive
            included) or an array of another shape or kind.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"image features {path!r} do not exist (tools/data/extract_image_features.py writes them)")
    array = load_array_file(path, "image features", mmap_mode="r")
    if not isinstance(array, np.ndarray):
        raise BadAnnotationError(f"{path}: expected a .npy array, got a .npz archive")
    if array.ndim not in (2, 4) or not np.issubdtype(array.dtype, np.number):
        raise BadAnnotationError(f"{path}: expected a [images, dims] or [images, C, h, w] array of numbers, got shape "
                                 f"{array.shape}, dtype {array.dtype}")
    return array


def feature_dim(path: str) -> int:
    """F of a features file (C of a maps file)."""
    return int(_open(path).shape[1])


def read_feature_row(path: str, row: int) -> np.ndarray:
    """Row ``row`` of a features file as float32 [F] ([C, h, w] for a maps file).

    Raises:
        BadAnnotationError: naming the file and the row when a value is NaN or infinite (it would
            reach the model; each row is checked when it is read, so a large file is never
            scanned as a whole).
    """
    values = np.array(_open(path)[row], dtype=np.float32)  # a copy: the memory map is read-only
    bad = ~np.isfinite(values)
    if bad.any():
        raise BadAnnotationError(f"{path}: row {row}: {int(bad.sum())} of {values.size} feature values are not finite "
                                 f"(first at column {int(np.argmax(bad))}: {values[bad][0]})")
    return values


def _check_ids(ids_path: str, records: list) -> None:
    """The ids file lists the image id of each row, in the split's order (blank lines ignored)."""
    ids = [line.strip() for line in read_text_lines(ids_path, "image ids file") if line.strip()]
    if len(ids) != len(records):
        raise BadAnnotationError(f"{ids_path}: {len(ids)} image ids for {len(records)} images of the split")
    for n, (image_id, record) in enumerate(zip(ids, records), 1):
        if image_id != str(record["image_id"]):
            raise BadAnnotationError(f"{ids_path}:{n}: image id {image_id!r}, but row {n - 1} of the split is image "
                                     f"{record['image_id']!r}: the features are not in the split's order")


def attach_image_features(records: list, dataset_name: str, features_dir: str) -> list:
    """Records with ``feature_file`` / ``feature_row`` (copies; records that have them are kept).

    ``features_dir`` (``MODEL.RETRIEVAL.IMAGE_FEATURES_DIR``) is resolved by
    :func:`phrasedet.paths.resolve_data_path`: a relative path under ``$PHRASEDET_DATASETS`` first.

    Raises an error naming the file when the row count, or the ids file, does not match the split.
    """
    if all("feature_file" in r for r in records):
        return records
    if not features_dir:
        raise ValueError(f"{dataset_name}: MODEL.RETRIEVAL.IMAGE_INPUT 'features' needs MODEL.RETRIEVAL.IMAGE_FEATURES_DIR "
                         "(or a dataset whose records carry their features)")
    path = features_path(resolve_data_path(features_dir, "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR"), dataset_name)
    rows = _open(path).shape[0]
    if rows != len(records):
        raise BadAnnotationError(f"{path}: {rows} rows for the {len(records)} images of {dataset_name}")
    ids_path = path[: -len(".npy")] + ".txt"
    if os.path.isfile(ids_path):
        _check_ids(ids_path, records)
    return [{**r, "feature_file": path, "feature_row": i} for i, r in enumerate(records)]


def write_image_features(features_dir: str, dataset_name: str, features: np.ndarray, image_ids, dtype=np.float32) -> str:
    """Write ``<dataset_name>.npy`` ([N, F] or [N, C, h, w], ``dtype``) and ``<dataset_name>.txt``
    (the ids); returns the npy path."""
    os.makedirs(os.path.expanduser(features_dir), exist_ok=True)
    path = features_path(features_dir, dataset_name)
    np.save(path, np.asarray(features, dtype=dtype))
    with open(path[: -len(".npy")] + ".txt", "w", encoding="utf-8") as f:
        f.writelines(f"{i}\n" for i in image_ids)
    _open.cache_clear()
    return path
