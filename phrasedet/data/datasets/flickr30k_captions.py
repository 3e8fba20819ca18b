"""Flickr30K captions for image-sentence retrieval, from any of the three files users have.

- Flickr30K Entities ``Sentences/<id>.txt`` (markup stripped by
  :func:`~phrasedet.data.datasets.flickr30k_entities.parse_sentences_file`) with a split list;
- Flickr30K's own ``results_20130124.token``: ``<image file>#<n>\\t<caption>`` lines;
- Karpathy's ``dataset_flickr30k.json`` (:mod:`.karpathy`).

Records follow the caption contract of docs/DATA.md (``dataset`` = ``"flickr30k"``). Images are
not checked at load time: precomputed-feature users have none, and the mapper names a missing
image file when it reads it.
"""
import logging
import os
import re
from collections import Counter

from .common import BadAnnotationError, read_id_list
from .files import caption_record, clean_caption, read_text_lines
from .flickr30k_entities import parse_sentences_file, read_unrelated_captions
from .karpathy import read_karpathy_split, select_karpathy_split

__all__ = [
    "load_flickr30k_entities_captions",
    "read_flickr30k_token_file",
    "load_flickr30k_token_captions",
    "load_flickr30k_karpathy",
]

logger = logging.getLogger(__name__)

DATASET = "flickr30k"
_NUMBER = re.compile(r"[0-9]+")


def _image_id(file_name):
    """Flickr30K image id of an image file name: ``"1000092795.jpg"`` -> ``"1000092795"``."""
    return os.path.splitext(file_name)[0]


def _entities_captions(image_id, ann_root, unrelated, unrelated_file, drop_unrelated, counts):
    """(captions, caption ids) of one ``Sentences/<id>.txt``, unrelated ones dropped if asked."""
    path = os.path.join(ann_root, "Sentences", f"{image_id}.txt")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Flickr30K Entities: image {image_id} is in the split list but {path} does not exist")
    captions = [caption for caption, _ in parse_sentences_file(path)]
    beyond = [i for i in sorted(unrelated) if i >= len(captions)]
    if beyond:
        raise BadAnnotationError(
            f"{unrelated_file}: image {image_id} sentence {beyond[0] + 1} but {path} has {len(captions)} captions"
        )
    counts["unrelated"] += len(unrelated)
    keep = [i for i in range(len(captions)) if not (drop_unrelated and i in unrelated)]
    return [captions[i] for i in keep], [f"{image_id}#{i}" for i in keep]


def load_flickr30k_entities_captions(
    ann_root: str,
    image_root: str,
    split_file: str,
    unrelated_captions_file: str = None,
    drop_unrelated: bool = False,
) -> list:
    """One split of Flickr30K's captions, from Flickr30K Entities ``Sentences/`` (``Annotations/``
    is not needed).

    Args:
        ann_root: folder holding ``Sentences/``.
        image_root: folder holding ``<id>.jpg`` (not read).
        split_file: one image id per line; records come in its order.
        unrelated_captions_file: ``UNRELATED_CAPTIONS``. Those captions are kept by default
            (the retrieval protocol scores all 5 captions of an image) and counted in the log.
        drop_unrelated: remove them instead (counted in the log); the other captions keep
            their ids ``"<image id>#<index in the file>"``.
    """
    if not os.path.isdir(ann_root):
        raise FileNotFoundError(f"Flickr30K Entities root {ann_root!r} does not exist")
    ids = read_id_list(split_file)
    unrelated = read_unrelated_captions(unrelated_captions_file) if unrelated_captions_file else {}
    counts = Counter()
    records = []
    for image_id in ids:
        captions, caption_ids = _entities_captions(
            image_id, ann_root, unrelated.get(image_id, set()), unrelated_captions_file, drop_unrelated, counts
        )
        records.append(caption_record(os.path.join(image_root, f"{image_id}.jpg"), image_id, DATASET, captions, caption_ids))
    logger.info(
        "Loaded %d images of %s: %d captions; %d captions listed in UNRELATED_CAPTIONS %s.",
        len(records), split_file, sum(len(r["captions"]) for r in records), counts["unrelated"],
        "dropped" if drop_unrelated else "kept",
    )
    return records


def _token_line(line, where):
    """(image file, caption number, key, caption) of one ``<image file>#<n>\\t<caption>`` line."""
    key, tab, text = line.partition("\t")
    if not tab:
        raise BadAnnotationError(f"{where}: no tab between '<image file>#<n>' and the caption")
    file_name, _, number = key.rpartition("#")
    if not file_name:
        raise BadAnnotationError(f"{where}: key {key!r} is not '<image file>#<n>'")
    if not _NUMBER.fullmatch(number):
        raise BadAnnotationError(f"{where}: caption number {number!r} of key {key!r} is not a non-negative integer")
    return file_name, int(number), key, clean_caption(text, where)


def read_flickr30k_token_file(path):
    """Flickr30K's ``results_20130124.token``: image id -> (image file, [(n, key, caption)]
    sorted by n), images in order of first appearance. Blank lines are ignored.

    Raises:
        BadAnnotationError: naming ``path:line`` for a line without a tab, a key without
            ``#<n>``, a non-integer n, a key already seen (and its line) or an empty caption.
    """
    by_image, seen = {}, {}
    for n, line in enumerate(read_text_lines(path, "Flickr30K token file"), 1):
        if not line.strip():
            continue
        file_name, number, key, caption = _token_line(line, f"{path}:{n}")
        if key in seen:
            raise BadAnnotationError(f"{path}:{n}: key {key!r} already on line {seen[key]}")
        seen[key] = n
        by_image.setdefault(_image_id(file_name), (file_name, []))[1].append((number, key, caption))
    for _, captions in by_image.values():
        captions.sort()
    return by_image


def load_flickr30k_token_captions(token_file: str, image_root: str, split_file: str = None) -> list:
    """Flickr30K captions from ``results_20130124.token``, ordered by caption number per image.

    Args:
        token_file: the token file; caption ids are its keys (``"1000092795.jpg#0"``).
        image_root: folder holding the image files named in the keys (not read).
        split_file: one image id per line (e.g. the Flickr30K Entities lists): only those
            images, in its order; ``None``: every image, in order of first appearance.

    Raises:
        BadAnnotationError: an image of ``split_file`` without any caption in ``token_file``.
    """
    by_image = read_flickr30k_token_file(token_file)
    ids = read_id_list(split_file) if split_file else list(by_image)
    missing = [i for i in ids if i not in by_image]
    if missing:
        raise BadAnnotationError(
            f"{token_file}: no caption of image {missing[0]} (listed in {split_file}; "
            f"{len(missing)} listed images have none)"
        )
    records = []
    for image_id in ids:
        file_name, captions = by_image[image_id]
        records.append(caption_record(os.path.join(image_root, file_name), image_id, DATASET,
                                      [c for _, _, c in captions], [k for _, k, _ in captions]))
    logger.info(
        "Loaded %d images of %s (split list %s): %d captions; %d images of the token file not in the split.",
        len(records), token_file, split_file, sum(len(r["captions"]) for r in records), len(by_image) - len(ids),
    )
    return records


def load_flickr30k_karpathy(karpathy_json: str, image_root: str, split: str) -> list:
    """One split (``train``, ``val``, ``test``) of Karpathy's ``dataset_flickr30k.json``, in file order.

    ``file_name`` is ``image_root/<filename>``, ``image_id`` the file name without its
    extension, captions the sentences' ``raw`` text and caption ids their ``sentid``.
    """
    images = select_karpathy_split(read_karpathy_split(karpathy_json), split, karpathy_json)
    records = [
        caption_record(os.path.join(image_root, im.filename), _image_id(im.filename), DATASET, im.captions, im.caption_ids)
        for im in images
    ]
    logger.info("Loaded %d Flickr30K images (Karpathy split %s): %d captions.", len(records), split,
                sum(len(r["captions"]) for r in records))
    return records
