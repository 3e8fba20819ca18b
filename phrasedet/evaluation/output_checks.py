"""Checks of the model outputs handed to the evaluators, shared by every evaluation family.

A value that is not finite where the output contract wants a number (a box of a detection, an
embedding, an infinite point) is a ``ValueError`` naming the image, the output key and the first
bad row, never a silent miss or tie: a diverged model gives NaN everywhere. The saved files' readers
(``array_files.py``) name their first bad row the same way (:func:`first_bad_row`).
"""
from typing import Optional, Sequence, Tuple

import numpy as np

__all__ = ["check_output_rows", "first_bad_row"]


def first_bad_row(bad: np.ndarray, labels: Optional[Sequence] = None) -> Tuple[int, str, int]:
    """For ``bad`` (bool [R, ...], rows along axis 0, some True): ``(row, name, count)``, the first
    row holding a True, its name (``"row 1 ('dog')"``, with ``labels[row]`` when given) and how many
    rows hold one."""
    rows = bad.reshape(len(bad), -1).any(axis=1)
    row = int(np.argmax(rows))
    name = f"row {row}"
    if labels is not None:
        label = labels[row]
        name += f" ({label.item() if isinstance(label, np.generic) else label!r})"  # 'img2', not np.str_('img2')
    return row, name, int(rows.sum())


def check_output_rows(image_id: str, key: str, bad: np.ndarray, values: np.ndarray,
                      labels: Optional[Sequence] = None, what: str = "finite numbers") -> None:
    """Raise when ``bad`` (bool [R, ...], rows along axis 0) marks a value of ``values`` [R, ...]
    (the output ``key`` of image ``image_id``); the message names the first such row, its label
    ``labels[row]`` when given, and its values.

    Example: ``image_id '7': 'boxes' row 1 ('dog'): values must be finite numbers, got
    [[0.0, 0.0, nan, 5.0]] (1 such rows; a diverged model?)``.
    """
    if not bad.any():
        return
    row, name, count = first_bad_row(bad, labels)
    raise ValueError(f"image_id {image_id!r}: {key!r} {name}: values must be {what}, got "
                     f"{np.asarray(values[row]).tolist()} ({count} such rows; a diverged model?)")
