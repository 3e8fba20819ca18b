"""Karpathy split files (``dataset_flickr30k.json``, ``dataset_coco.json``): reader and split selection.

The file (Karpathy & Fei-Fei's release, used by VSE++ and later retrieval work)::

    {"dataset": "coco", "images": [{"filename": "COCO_val2014_000000391895.jpg",
      "filepath": "val2014",            # COCO only
      "cocoid": 391895,                 # COCO only
      "imgid": 0, "split": "train" | "val" | "test" | "restval", "sentids": [...],
      "sentences": [{"raw": "A man ...", "tokens": [...], "sentid": 770337, "imgid": 0}, ...]}, ...]}

COCO's ``restval`` images (30,504 of the original val2014 set) are extra training images: with
them the train split has 113,287 images, as in VSE++.
"""
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Optional

from .common import BadAnnotationError
from .files import check_record, clean_caption, load_json_file

__all__ = ["KarpathyImage", "read_karpathy_split", "select_karpathy_split", "KARPATHY_SPLITS"]

logger = logging.getLogger(__name__)

#: The ``split`` values a Karpathy file may hold.
KARPATHY_SPLITS = ("train", "val", "test", "restval")
#: The splits a loader may ask for (``restval`` only joins ``train``).
_SELECTABLE = ("train", "val", "test")


@dataclass(frozen=True)
class KarpathyImage:
    """One entry of ``images``; ``sentences`` are (sentid as str, cleaned ``raw``) in file order."""

    index: int  # position in "images", for error messages
    filename: str
    split: str
    sentences: tuple
    filepath: str = ""
    cocoid: Optional[int] = None

    @property
    def captions(self):
        return [caption for _, caption in self.sentences]

    @property
    def caption_ids(self):
        return [sentid for sentid, _ in self.sentences]


#: The keys read from each entry of ``images`` and of its ``sentences``, with their kinds
#: (:data:`phrasedet.fileio.KINDS`).
_IMAGE_KINDS = {"filename": "str", "split": "any", "sentences": "list"}
_COCO_KINDS = {"filepath": "str", "cocoid": "int"}
_SENTENCE_KINDS = {"raw": "str", "sentid": "int_or_str"}


def _sentences(image, where):
    """(sentid as str, cleaned ``raw``) of each sentence of an image, every key checked."""
    out = []
    for k, sent in enumerate(image["sentences"]):
        at = f"{where}.sentences[{k}]"
        check_record(sent, _SENTENCE_KINDS, at)
        out.append((str(sent["sentid"]), clean_caption(sent["raw"], f"{at}.raw")))
    return tuple(out)


def _image(image, k, path, coco):
    """Entry ``k`` of ``images`` as a :class:`KarpathyImage`, every key checked."""
    where = f"{path}: images[{k}]"
    check_record(image, {**_IMAGE_KINDS, **(_COCO_KINDS if coco else {})}, where)
    if image["split"] not in KARPATHY_SPLITS:
        raise BadAnnotationError(
            f"{where}: unknown split {image['split']!r} (expected one of {', '.join(KARPATHY_SPLITS)})"
        )
    return KarpathyImage(
        k, image["filename"], image["split"], _sentences(image, where),
        image["filepath"] if coco else "", image["cocoid"] if coco else None,
    )


def _check_unique(images, path, coco):
    """An image listed twice (the same ``filepath``/``filename``, or for COCO the same ``cocoid``)
    would be loaded twice: an error naming both indices, whatever the split (train included)."""
    first = {}
    for image in images:
        keys = [("filename", image.filename, (image.filepath, image.filename))]
        if coco:
            keys.append(("cocoid", image.cocoid, ("cocoid", image.cocoid)))
        for name, value, key in keys:
            j = first.setdefault(key, image.index)
            if j != image.index:
                raise BadAnnotationError(f"{path}: images[{image.index}]: {name} {value!r} (split {image.split}) "
                                         f"already listed at images[{j}]: an image may be listed once")


def read_karpathy_split(path, coco=False):
    """All images of a Karpathy split file, in file order, as :class:`KarpathyImage`.

    Args:
        coco: ``dataset_coco.json``: each image must also have ``filepath`` and ``cocoid``.

    Raises:
        BadAnnotationError: naming the file, the image index in ``images`` and the key, for a
            missing key, a value of the wrong type (``filename``, ``filepath``, ``raw``: strings;
            ``cocoid``: an integer; ``sentid``: an integer or a string; ``sentences``: a list), an
            unknown ``split`` value or an empty caption; an image listed twice (both indices).
    """
    data = check_record(load_json_file(path, "Karpathy split file"), {"images": "list"}, path)
    images = [_image(image, k, path, coco) for k, image in enumerate(data["images"])]
    _check_unique(images, path, coco)
    return images


def select_karpathy_split(images, split, path, restval_to_train=False):
    """The images of ``split`` (``train``, ``val`` or ``test``) in file order.

    Args:
        restval_to_train: ``train`` also takes the ``restval`` images (COCO, VSE++'s "rV").

    The number of images of each split value in the file is logged, so images left out of every
    split are never silent.
    """
    if split not in _SELECTABLE:
        raise KeyError(f"Karpathy split {split!r} unknown; choose from {list(_SELECTABLE)}")
    wanted = {"train", "restval"} if split == "train" and restval_to_train else {split}
    chosen = [im for im in images if im.split in wanted]
    counts = Counter(im.split for im in images)
    logger.info(
        "%s: split %s takes %d of %d images (%s)%s.", path, split, len(chosen), len(images),
        ", ".join(f"{counts[s]} {s}" for s in KARPATHY_SPLITS),
        " with restval" if wanted == {"train", "restval"} else "",
    )
    return chosen
