"""Reading .npz / .npy files that users hand to the evaluators (saved embeddings, scores, points,
heatmaps), with errors that name the file and the key. Shared by every evaluation family.

Files are read with :func:`phrasedet.fileio.load_array_file` (no pickles) and
:func:`phrasedet.fileio.npz_array`: a file or array numpy cannot read, a missing key, an array of
the wrong shape, dtype or length and a value that is not finite are each a
:class:`~phrasedet.fileio.BadFileError` (a ``ValueError``) whose message starts with the file.
"""
from typing import Optional, Sequence

import numpy as np

from phrasedet.fileio import BadFileError, load_array_file, npz_array

from .output_checks import first_bad_row

__all__ = ["load_npz", "bad_key", "get_array", "check_length", "check_rows", "check_finite",
           "scalar"]


def load_npz(path: str, what: str, keys: str):
    """The opened ``.npz`` ``path``, ``what`` (e.g. "a points file") that must hold ``keys`` (named in
    the error when the file is a single ``.npy`` array). Use it as a context manager."""
    data = load_array_file(path, what)
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise BadFileError(f"{path}: {what} must be a .npz with keys {keys}; got a single array of shape {data.shape}")
    return data


def bad_key(path: str, key: str, why: str) -> BadFileError:
    """The error for a bad ``key`` of the file ``path``."""
    return BadFileError(f"{path}: key {key!r}: {why}")


def get_array(npz, path: str, key: str, ndim: int, kind: str) -> np.ndarray:
    """``npz[key]`` with ``ndim`` dimensions and numpy dtype kind in ``kind`` (e.g. "f", "iu", "U")."""
    array = npz_array(npz, path, key)
    if array.ndim != ndim or (array.dtype.kind not in kind and array.size):
        raise bad_key(path, key, f"expected a {ndim}-D array of kind {kind!r}, got dtype {array.dtype} "
                              f"and shape {array.shape}")
    return array


def scalar(npz, path: str, key: str, kind: str):
    """The single value (0-d array of dtype kind in ``kind``) ``npz[key]``, as a Python value."""
    value = npz_array(npz, path, key)
    if value.ndim != 0 or value.dtype.kind not in kind:
        raise bad_key(path, key, f"expected a single value of kind {kind!r}, got dtype {value.dtype} and shape "
                              f"{value.shape}")
    return value.item()


def check_length(path: str, key: str, array, length: int, of: str) -> None:
    """``array`` (``path``'s ``key``) must have ``length`` entries, one per ``of``."""
    if len(array) != length:
        raise bad_key(path, key, f"has {len(array)} entries, but there are {length} {of}")


def check_rows(path: str, key: str, bad: np.ndarray, ids: Optional[Sequence] = None, what: str = "finite numbers"):
    """``bad`` (bool, the shape of ``path``'s array ``key``, rows along axis 0) marks values that
    are not ``what``; the error names the first row with one, and its id ``ids[row]`` when given."""
    if not bad.any():
        return
    _, name, count = first_bad_row(bad, ids)
    raise bad_key(path, key, f"{name}: values must be {what} ({count} such rows)")


def check_finite(path: str, key: str, array: np.ndarray, ids: Optional[Sequence] = None,
                 allow_nan: bool = False) -> None:
    """Every value of ``array`` (``path``'s ``key``) must be finite, or NaN with ``allow_nan``
    (:func:`check_rows`)."""
    if allow_nan:
        check_rows(path, key, np.isinf(array), ids, "finite numbers or NaN")
    else:
        check_rows(path, key, ~np.isfinite(array), ids)
