"""Helpers shared by the dataset loaders: errors, box checks, id lists."""
import os
import re

from phrasedet.fileio import BadFileError, read_text_lines

__all__ = [
    "BadAnnotationError", "check_box", "union_box", "read_id_list", "require_image_files", "cached_load",
    "clear_load_cache",
]

_LOADED = {}
_DECIMAL = re.compile(r"[0-9]+")


#: An annotation file is malformed; the message names the file and the line, record or key. The
#: same class as :class:`phrasedet.fileio.BadFileError`, which every reader of the package raises.
BadAnnotationError = BadFileError


def check_box(box, width, height, where, policy="error"):
    """Validate a 0-based continuous xyxy box against the image size.

    Args:
        policy: ``"error"`` raises :class:`BadAnnotationError` for a box outside the image or
            with non-positive size; ``"clip"`` clips a box that sticks out (still raising for an
            empty one).

    Returns:
        (box, clipped): the box as floats and 1 if it was clipped, else 0.
    """
    if policy not in ("error", "clip"):
        raise ValueError(f"box policy must be 'error' or 'clip', got {policy!r}")
    x1, y1, x2, y2 = (float(v) for v in box)
    inside = 0 <= x1 and 0 <= y1 and x2 <= width and y2 <= height
    clipped = 0
    if not inside:
        if policy == "error":
            raise BadAnnotationError(
                f"{where}: box [{x1:g}, {y1:g}, {x2:g}, {y2:g}] (0-based xyxy) lies outside the "
                f"{width}x{height} image (use box_policy='clip' to clip such boxes)"
            )
        x1, y1, x2, y2 = max(x1, 0.0), max(y1, 0.0), min(x2, float(width)), min(y2, float(height))
        clipped = 1
    if x2 <= x1 or y2 <= y1:
        raise BadAnnotationError(f"{where}: empty box [{x1:g}, {y1:g}, {x2:g}, {y2:g}]")
    return [x1, y1, x2, y2], clipped


def union_box(boxes):
    """Smallest xyxy box containing all ``boxes`` (a list of [x1, y1, x2, y2])."""
    return [
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    ]


def read_id_list(path, as_int=False):
    """Image ids, one per line (blank lines ignored), in file order; a duplicate id is an error.

    Args:
        as_int: each id must be a decimal integer and is returned as an ``int`` (ReferIt's image
            lists); else ids are strings.
    """
    ids, seen = [], {}
    for n, line in enumerate(read_text_lines(path, "split list"), 1):  # a byte-order mark is removed
        image_id = line.strip()
        if not image_id:
            continue
        if as_int and not _DECIMAL.fullmatch(image_id):
            raise BadAnnotationError(f"{path}:{n}: image id {image_id!r} is not an integer")
        key = int(image_id) if as_int else image_id
        if key in seen:
            raise BadAnnotationError(f"{path}:{n}: image id {image_id} already listed on line {seen[key]}")
        seen[key] = n
        ids.append(key)
    return ids


def require_image_files(records, dataset):
    """Raise ``FileNotFoundError`` naming the first missing image file (and how many are missing)."""
    missing = [r["file_name"] for r in records if not os.path.isfile(r["file_name"])]
    if missing:
        raise FileNotFoundError(
            f"{dataset}: {len(missing)} of {len(records)} image files are missing, e.g. {missing[0]!r}"
        )


def cached_load(loader, *args):
    """``loader(*args)``, computed once per process for the same arguments.

    Registered datasets are read several times at start-up (data loader, training vocabulary,
    word2vec captions); parsing 30K XML files each time would cost minutes. Returns a new list
    of the same record dicts: consumers must not mutate records (mappers deep-copy them).
    """
    key = (loader.__module__, loader.__qualname__, args)
    if key not in _LOADED:
        _LOADED[key] = loader(*args)
    return list(_LOADED[key])


def clear_load_cache():
    """Forget every cached dataset (after annotation files changed on disk)."""
    _LOADED.clear()
