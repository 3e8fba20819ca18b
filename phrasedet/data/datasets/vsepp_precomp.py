"""VSE++'s precomputed-feature release (``data/f30k_precomp``, ``data/coco_precomp``).

``<split>_caps.txt`` holds one caption per line, 5 consecutive lines per image; ``<split>_ims.npy``
holds one feature row per image, or one per caption (each image's row repeated 5 times, which
VSE++ reads with ``im_div = 5``). Splits: ``train``, ``dev``, ``test`` (COCO's ``test`` is 1K
images, ``testall`` the 5K). There are no image files: ``file_name`` is ``""`` and a record
points at its feature row instead.
"""
import logging
import os

import numpy as np

from phrasedet.fileio import load_array_file

from .common import BadAnnotationError
from .files import caption_record, clean_caption, read_text_lines

__all__ = ["load_vsepp_precomp", "CAPTIONS_PER_IMAGE"]

logger = logging.getLogger(__name__)

DATASET = "vsepp_precomp"
CAPTIONS_PER_IMAGE = 5


def _feature_rows(path):
    """Number of rows of the ``.npy`` array (memory-mapped: only the header is read)."""
    array = load_array_file(path, "VSE++ image features file", mmap_mode="r")  # a missing file: FileNotFoundError naming it
    if not isinstance(array, np.ndarray) or array.ndim == 0:
        what = f"shape {array.shape}" if isinstance(array, np.ndarray) else "a .npz archive"
        raise BadAnnotationError(f"{path}: expected an array with a row per image or per caption, got {what}")
    return array.shape[0]


def _row_step(num_rows, num_captions, caps_path, ims_path):
    """1 when the features have a row per image, 5 when a row per caption; else an error."""
    num_images = num_captions // CAPTIONS_PER_IMAGE
    if num_captions == 0 or num_captions % CAPTIONS_PER_IMAGE:
        raise BadAnnotationError(
            f"{caps_path}: {num_captions} captions is not a positive multiple of {CAPTIONS_PER_IMAGE} "
            f"({CAPTIONS_PER_IMAGE} per image; features {ims_path} have {num_rows} rows)"
        )
    if num_rows not in (num_images, num_captions):
        raise BadAnnotationError(
            f"{ims_path}: {num_rows} feature rows, but {caps_path} has {num_captions} captions: expected "
            f"{num_images} (one per image) or {num_captions} (one per caption)"
        )
    return 1 if num_rows == num_images else CAPTIONS_PER_IMAGE


def load_vsepp_precomp(data_dir: str, split: str) -> list:
    """One split of a VSE++ precomputed-feature folder, one record per image in row order.

    ``image_id`` is the image's index as a string, ``captions`` its 5 lines of
    ``<split>_caps.txt`` (caption ids: their 0-based line index), ``feature_file`` the ``.npy``
    path and ``feature_row`` the image's row in it (``5 * i`` when rows are per caption).

    Raises:
        BadAnnotationError: an empty caption line (``path:line``), a caption count that is not
            a multiple of 5, or a row count that is neither the number of images nor of
            captions (naming both files and the counts).
    """
    caps_path = os.path.join(data_dir, f"{split}_caps.txt")
    ims_path = os.path.join(data_dir, f"{split}_ims.npy")
    lines = read_text_lines(caps_path, "VSE++ captions file")
    captions = [clean_caption(line, f"{caps_path}:{n}") for n, line in enumerate(lines, 1)]
    num_rows = _feature_rows(ims_path)
    step = _row_step(num_rows, len(captions), caps_path, ims_path)
    records = []
    for i in range(len(captions) // CAPTIONS_PER_IMAGE):
        first = CAPTIONS_PER_IMAGE * i
        rows = range(first, first + CAPTIONS_PER_IMAGE)
        records.append(caption_record("", str(i), DATASET, [captions[r] for r in rows], [str(r) for r in rows],
                                      feature_file=ims_path, feature_row=step * i))
    logger.info("Loaded %d images of %s (%d captions; %d feature rows in %s, one per %s).", len(records), caps_path,
                len(captions), num_rows, ims_path, "image" if step == 1 else "caption")
    return records
