"""Saved test embeddings and score matrices, for re-evaluation with ``tools/evaluation/evaluate_retrieval.py``.

``retrieval_embeddings.npz`` (written for the dot-product scorer):

* ``image_ids`` str [N], dataset order;
* ``images`` float32 [N, D]; ``captions`` float32 [M, D], image by image in record order;
* ``caption_to_image`` int64 [M]: the image (row of ``images``) of each caption.

``retrieval_scores.npz`` (written for any other scorer, e.g. paper 000's similarity network):

* ``scores`` [N, M]: the full score matrix, written block by block (never held whole);
* ``image_ids``, ``caption_to_image`` as above;
* ``gt_scores`` [M]: ``scorer.paired`` of each caption with its image (the text -> image threshold,
  so that the file gives the in-loop numbers bit for bit). Optional when reading: the default is
  the matrix entry ``scores[caption_to_image[j], j]``.

A score matrix may also be a bare ``.npy`` [N, M] (memory-mapped when read); its
``caption_to_image`` then comes from elsewhere.

Readers raise :class:`phrasedet.fileio.BadFileError` (a ValueError) naming the file and the key: a
file numpy cannot read (truncated, not a zip), a missing key, an array of the wrong shape, dtype
or length, a ``caption_to_image`` out of range, an embedding that is not finite. Scores may be NaN
or infinite (a NaN counts as a tie, docs/EVALUATION.md).
"""
import os
import zipfile
from typing import Sequence

import numpy as np

from phrasedet.fileio import BadFileError, load_array_file

from ..array_files import bad_key, check_finite, check_length, get_array, load_npz
from .ranks import check_caption_to_image

__all__ = ["EMBEDDINGS_FILE", "SCORES_FILE", "ScoresWriter", "load_embeddings", "load_scores", "save_embeddings"]

EMBEDDINGS_FILE = "retrieval_embeddings.npz"
SCORES_FILE = "retrieval_scores.npz"


def _write_member(zf: zipfile.ZipFile, key: str, array: np.ndarray) -> None:
    with zf.open(f"{key}.npy", "w", force_zip64=True) as f:
        np.lib.format.write_array(f, np.ascontiguousarray(array), allow_pickle=False)


def _ids(image_ids: Sequence[str]) -> np.ndarray:
    return np.asarray([str(i) for i in image_ids], dtype=str).reshape(-1)


def save_embeddings(path: str, image_ids: Sequence[str], images: np.ndarray, captions: np.ndarray,
                    caption_to_image: np.ndarray) -> None:
    """Write ``retrieval_embeddings.npz`` (module docstring) to ``path``."""
    with zipfile.ZipFile(path, "w") as zf:  # stored, zip64 where needed: the defaults
        for key, array in (("image_ids", _ids(image_ids)), ("images", np.asarray(images, np.float32)),
                           ("captions", np.asarray(captions, np.float32)),
                           ("caption_to_image", np.asarray(caption_to_image, np.int64))):
            _write_member(zf, key, array)


class ScoresWriter:
    """Streams the score matrix [N, M] into ``retrieval_scores.npz``, one row block at a time.

    Use as a context manager and pass :meth:`write` as ``score_sink``; a matrix left incomplete
    (an error while scoring) is deleted.
    """

    def __init__(self, path: str, image_ids: Sequence[str], caption_to_image: np.ndarray, gt_scores: np.ndarray):
        self.path = path
        self._shape = (len(image_ids), len(caption_to_image))
        self._zip = zipfile.ZipFile(path, "w")  # stored, zip64 where needed: the defaults
        for key, array in (("image_ids", _ids(image_ids)), ("caption_to_image", np.asarray(caption_to_image, np.int64)),
                           ("gt_scores", np.asarray(gt_scores))):
            _write_member(self._zip, key, array)
        self._member = None
        self._rows = 0

    def write(self, first_row: int, scores: np.ndarray) -> None:
        """Append rows ``first_row .. first_row + b - 1`` (``scores [b, M]``; blocks in row order)."""
        if first_row != self._rows or scores.shape[1:] != self._shape[1:]:
            raise ValueError(f"{self.path}: expected the block of rows from {self._rows} with {self._shape[1]} "
                             f"columns, got rows from {first_row} of shape {scores.shape}")
        if self._member is None:
            self._open_scores(scores.dtype)
        self._member.write(np.ascontiguousarray(scores).tobytes())
        self._rows += scores.shape[0]

    def _open_scores(self, dtype) -> None:
        self._member = self._zip.open("scores.npy", "w", force_zip64=True)
        np.lib.format.write_array_header_1_0(self._member, {
            "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": self._shape})

    def _finish(self) -> None:
        if self._member is not None:
            self._member.close()
        self._zip.close()
        self._zip = None

    def close(self) -> None:
        """Finish the file; ValueError if rows are missing (the file is then deleted)."""
        if self._zip is None:
            return
        if self._member is None and self._shape[0] == 0:
            self._open_scores(np.float32)
        self._finish()
        if self._rows != self._shape[0]:
            os.remove(self.path)
            raise ValueError(f"{self.path}: only {self._rows} of {self._shape[0]} rows were written; file deleted")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.close()
        elif self._zip is not None:
            self._finish()
            os.remove(self.path)


def _caption_to_image(npz, path: str, num_images: int, num_captions: int) -> np.ndarray:
    c2i = get_array(npz, path, "caption_to_image", 1, "iu")
    try:
        return check_caption_to_image(c2i, num_images, num_captions)
    except ValueError as e:
        raise bad_key(path, "caption_to_image", str(e)) from None


def load_embeddings(path: str) -> dict:
    """Read ``retrieval_embeddings.npz``: dict with ``image_ids`` (list of str), ``images``
    float32 [N, D], ``captions`` float32 [M, D] (finite), ``caption_to_image`` int64 [M], all
    checked (module docstring)."""
    with load_npz(path, "an embeddings file", "image_ids, images, captions, caption_to_image") as npz:
        images = get_array(npz, path, "images", 2, "f").astype(np.float32, copy=False)
        captions = get_array(npz, path, "captions", 2, "f").astype(np.float32, copy=False)
        if images.shape[1] != captions.shape[1]:
            raise bad_key(path, "captions", f"embedding size {captions.shape[1]} differs from the images' "
                                         f"({images.shape[1]}): images {images.shape}, captions {captions.shape}")
        image_ids = get_array(npz, path, "image_ids", 1, "U")
        check_length(path, "image_ids", image_ids, len(images), "images")
        c2i = _caption_to_image(npz, path, len(images), len(captions))
    check_finite(path, "images", images, image_ids)
    check_finite(path, "captions", captions)
    return {"image_ids": image_ids.tolist(), "images": images, "captions": captions, "caption_to_image": c2i}


def load_scores(path: str) -> dict:
    """Read a score matrix: a ``.npz`` with ``scores`` [N, M] and optionally ``caption_to_image``,
    ``image_ids`` and ``gt_scores`` (checked against the matrix), or a bare ``.npy`` [N, M]
    (memory-mapped). Returns a dict with the keys found (``image_ids`` as a list of str)."""
    data = load_array_file(path, "score matrix file", mmap_mode="r")
    if not isinstance(data, np.lib.npyio.NpzFile):
        if data.ndim != 2 or data.dtype.kind != "f":
            raise BadFileError(f"{path}: a score matrix must be a 2-D float array [images, captions], "
                               f"got dtype {data.dtype} and shape {data.shape}")
        return {"scores": data}
    with data as npz:
        scores = get_array(npz, path, "scores", 2, "f")
        num_images, num_captions = scores.shape
        out = {"scores": scores}
        if "caption_to_image" in npz.files:
            out["caption_to_image"] = _caption_to_image(npz, path, num_images, num_captions)
        if "image_ids" in npz.files:
            ids = get_array(npz, path, "image_ids", 1, "U")
            check_length(path, "image_ids", ids, num_images, "rows in 'scores'")
            out["image_ids"] = ids.tolist()
        if "gt_scores" in npz.files:
            gt = get_array(npz, path, "gt_scores", 1, "f")
            check_length(path, "gt_scores", gt, num_captions, "columns (captions) in 'scores'")
            out["gt_scores"] = gt
    return out
