"""Reading .npz / .npy files that users hand to the evaluators (saved embeddings, scores, points,
heatmaps), with errors that name the file and the key. Shared by every evaluation family."""
from typing import Optional

import numpy as np

__all__ = ["load_array_file", "bad_key", "get_array", "check_length"]


def load_array_file(path: str, mmap_mode: Optional[str] = None):
    """``np.load`` without pickles; a file numpy cannot read is a ValueError naming it."""
    try:
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except FileNotFoundError:
        raise
    except Exception as e:  # noqa: BLE001  (numpy raises several types for a file it cannot read)
        raise ValueError(f"{path}: not a readable .npz or .npy file ({type(e).__name__}: {e})") from None


def bad_key(path: str, key: str, why: str) -> ValueError:
    """The error for a bad ``key`` of the file ``path``."""
    return ValueError(f"{path}: key {key!r}: {why}")


def get_array(npz, path: str, key: str, ndim: int, kind: str) -> np.ndarray:
    """``npz[key]`` with ``ndim`` dimensions and numpy dtype kind in ``kind`` (e.g. "f", "iu", "U")."""
    if key not in npz.files:
        raise ValueError(f"{path}: missing key {key!r} (the file holds {sorted(npz.files)})")
    array = npz[key]
    if array.ndim != ndim or (array.dtype.kind not in kind and array.size):
        raise bad_key(path, key, f"expected a {ndim}-D array of kind {kind!r}, got dtype {array.dtype} "
                              f"and shape {array.shape}")
    return array


def check_length(path: str, key: str, array: np.ndarray, length: int, of: str) -> None:
    """``array`` (``path``'s ``key``) must have ``length`` entries, one per ``of``."""
    if len(array) != length:
        raise bad_key(path, key, f"has {len(array)} entries, but there are {length} {of}")
