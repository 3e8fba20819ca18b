"""Damaged ``.npz`` files for the fuzz tests of array-file readers (with :mod:`tests.fuzz`).

:func:`damaged_npz` draws a file (bytes) holding the given arrays with one structural damage (a key
deleted, an array of another shape or dtype, a NaN or an infinity among floats, one row fewer,
an empty or 0-d array), or any damage of :func:`tests.fuzz.damaged_bytes` to the zip container.
"""
import io
import warnings

import numpy as np
from hypothesis import strategies as st

from tests.fuzz import damaged_bytes

__all__ = ["damaged_npz", "npz_bytes"]


def npz_bytes(arrays: dict) -> bytes:
    """``np.savez`` of ``arrays`` (uncompressed), as bytes."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _with_value(a: np.ndarray, value) -> np.ndarray:
    if a.dtype.kind != "f" or a.size == 0:
        return a.astype(np.float64).ravel()[:0] if a.size == 0 else np.full(a.shape, value)
    out = a.copy()
    out.flat[out.size // 2] = value
    return out


#: name -> function of an array giving its damaged replacement.
_REPLACEMENTS = {
    "nan": lambda a: _with_value(a, np.nan),
    "inf": lambda a: _with_value(a, np.inf),
    "flat": lambda a: a.reshape(-1),
    "extra_dim": lambda a: a[None],
    "scalar": lambda a: np.asarray(a.flat[0] if a.size else 0),
    "empty": lambda a: a.reshape(-1)[:0] if a.ndim < 2 else a[:0],
    "one_row_fewer": lambda a: a[:-1] if a.ndim else a[None],
    "transposed": lambda a: a.T.copy(),
    "as_str": lambda a: a.astype(str),
    "as_int": lambda a: a.astype(np.int64) if a.dtype.kind in "fiub" else np.arange(a.size).reshape(a.shape),
    "as_bool": lambda a: a.astype(bool) if a.dtype.kind in "fiub" else np.ones(a.shape, bool),
    "as_complex": lambda a: a.astype(np.complex128) if a.dtype.kind in "fiub" else a,
}


def _damage(arrays: dict, key: str, how: str) -> bytes:
    arrays = dict(arrays)
    if how == "delete":
        del arrays[key]
    else:
        with warnings.catch_warnings(), np.errstate(all="ignore"):  # NaN -> int casts, complex -> real
            warnings.simplefilter("ignore")
            arrays[key] = _REPLACEMENTS[how](np.asarray(arrays[key]))
    return npz_bytes(arrays)


def damaged_npz(arrays: dict):
    """A strategy of damaged ``.npz`` files (bytes) of ``arrays`` ``{key: array}``."""
    structural = st.tuples(st.sampled_from(sorted(arrays)), st.sampled_from(["delete", *_REPLACEMENTS])).map(
        lambda t: _damage(arrays, *t))
    return st.one_of(structural, damaged_bytes(npz_bytes(arrays)))
