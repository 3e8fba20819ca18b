"""MS-COCO captions on Karpathy's split, for image-sentence retrieval.

Images and splits come from ``dataset_coco.json`` (:mod:`.karpathy`): 113,287 train images
(``restval`` included), 5,000 val, 5,000 test. Captions come from the official
``captions_{train,val}2014.json`` when given (matched by ``cocoid``, ordered by annotation id,
with the image size), else from the Karpathy file's ``raw`` sentences. Some images have 6 or 7
captions; the standard protocol uses 5 per image (``max_captions``).
"""
import logging
import os
from collections import Counter

from .common import BadAnnotationError
from .files import caption_record, check_record, clean_caption, load_json_file, record_where
from .karpathy import read_karpathy_split, select_karpathy_split

__all__ = ["read_coco_captions", "load_coco_karpathy"]

logger = logging.getLogger(__name__)

DATASET = "coco"


#: The keys read from a COCO caption file's ``images`` and ``annotations`` entries, with their
#: kinds (:data:`phrasedet.fileio.KINDS`).
_IMAGE_KINDS = {"id": "int", "height": "positive", "width": "positive"}
_ANNOTATION_KINDS = {"image_id": "int", "id": "int", "caption": "str"}


def _distinct_files(paths):
    """The same file given twice (by path, link or the same real path) would double every caption."""
    first = {}
    for n, path in enumerate(paths):
        real = os.path.realpath(path)
        if first.setdefault(real, (n, path))[0] != n:
            raise BadAnnotationError(f"{path}: COCO captions file given twice in {list(paths)} (entries "
                                     f"{first[real][0]} and {n}): every caption would be doubled")


def _first_place(seen, what, key, where):
    """Record ``key`` (an image or annotation id) at ``where``; an error naming both places when
    it was seen before (in this file or another of the list)."""
    first = seen.setdefault(key, where)
    if first != where:  # ``where`` names the file and the index: unique per record
        raise BadAnnotationError(f"{where}: {what} id {key} already at {first}")


def read_coco_captions(paths):
    """Official COCO caption files (``{"images": [...], "annotations": [...]}``).

    Returns:
        (captions, sizes): image id -> [(annotation id, caption)] sorted by annotation id, and
        image id -> (height, width).

    Raises:
        BadAnnotationError: naming the file, the index (and id) in ``images`` or ``annotations``
            and the key, for a missing key, a value of the wrong type (ids: integers, sizes:
            positive numbers) or an empty caption; a file given twice; an image id or annotation id
            listed twice, in one file or across the files (naming both places): a doubled caption
            would push a real one out of the ``max_captions`` kept.
    """
    _distinct_files(paths)
    captions, sizes = {}, {}
    image_at, annotation_at = {}, {}
    for path in paths:
        data = load_json_file(path, "COCO captions file")
        check_record(data, {"images": "list", "annotations": "list"}, path)
        for k, image in enumerate(data["images"]):
            where = record_where(path, "images", k, image)
            check_record(image, _IMAGE_KINDS, where)
            _first_place(image_at, "image", image["id"], where)
            sizes[image["id"]] = (image["height"], image["width"])
        for k, ann in enumerate(data["annotations"]):
            where = record_where(path, "annotations", k, ann)
            check_record(ann, _ANNOTATION_KINDS, where)
            _first_place(annotation_at, "annotation", ann["id"], where)
            caption = clean_caption(ann["caption"], f"{where}: key 'caption'")
            captions.setdefault(ann["image_id"], []).append((ann["id"], caption))
    for pairs in captions.values():
        pairs.sort()
    return captions, sizes


def _official_captions(image, official, karpathy_json, captions_files):
    """(captions, caption ids, size keys) of a Karpathy image from the official files."""
    captions, sizes = official
    where = f"{karpathy_json}: images[{image.index}]: cocoid {image.cocoid}"
    if image.cocoid not in captions:
        raise BadAnnotationError(f"{where} has no caption in {', '.join(captions_files)}")
    if image.cocoid not in sizes:
        raise BadAnnotationError(f"{where} is not in the 'images' of {', '.join(captions_files)}")
    pairs = captions[image.cocoid]
    height, width = sizes[image.cocoid]
    return [c for _, c in pairs], [str(i) for i, _ in pairs], dict(height=height, width=width)


def _first_captions(captions, caption_ids, max_captions, counts):
    """The first ``max_captions`` captions and ids (all when ``None``); what is left out is counted."""
    if max_captions is None or len(captions) <= max_captions:
        return captions, caption_ids
    counts["images_over"] += 1
    counts["left_out"] += len(captions) - max_captions
    return captions[:max_captions], caption_ids[:max_captions]


def load_coco_karpathy(
    karpathy_json: str,
    image_root: str,
    split: str,
    captions_files: tuple = (),
    max_captions: int = 5,
    restval_to_train: bool = True,
) -> list:
    """One split (``train``, ``val``, ``test``) of COCO on Karpathy's split, in file order.

    Args:
        karpathy_json: ``dataset_coco.json``.
        image_root: folder holding ``train2014/`` and ``val2014/``; ``file_name`` is
            ``image_root/<filepath>/<filename>`` (not read).
        captions_files: official ``captions_train2014.json`` / ``captions_val2014.json``; when
            given, captions (and ``height``/``width``) come from them, caption ids are the
            annotation ids and a Karpathy image without a caption there is an error. Empty:
            captions are Karpathy's ``raw`` sentences, caption ids their ``sentid``.
        max_captions: keep the first N captions of each image (those left out are counted in
            the log); ``None`` keeps all.
        restval_to_train: ``train`` also takes the ``restval`` images (113,287 in all).
    """
    if max_captions is not None and (not isinstance(max_captions, int) or max_captions < 1):
        raise ValueError(f"max_captions must be a positive integer or None, got {max_captions!r}")
    images = select_karpathy_split(read_karpathy_split(karpathy_json, coco=True), split, karpathy_json, restval_to_train)
    official = read_coco_captions(captions_files) if captions_files else None
    counts = Counter()
    records = []
    for image in images:
        if official is None:
            captions, caption_ids, size = image.captions, image.caption_ids, {}
        else:
            captions, caption_ids, size = _official_captions(image, official, karpathy_json, captions_files)
        captions, caption_ids = _first_captions(captions, caption_ids, max_captions, counts)
        file_name = os.path.join(image_root, image.filepath, image.filename)
        records.append(caption_record(file_name, str(image.cocoid), DATASET, captions, caption_ids, **size))
    logger.info(
        "Loaded %d COCO images (Karpathy split %s, captions from %s): %d captions; %d captions beyond "
        "max_captions=%s left out (from %d images).",
        len(records), split, ", ".join(captions_files) if captions_files else karpathy_json,
        sum(len(r["captions"]) for r in records), counts["left_out"], max_captions, counts["images_over"],
    )
    return records
