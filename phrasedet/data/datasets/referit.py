"""ReferIt Game (ReferItGame / refclef) from the REFER API layout.

``<refclef_root>/refs(<split_by>).p`` (a Python-2 pickle: a list of refs) and
``<refclef_root>/instances.json`` (COCO-style images and annotations). Each sentence of a ref is
one ground-truth (phrase, box) instance; the box is the ref's annotation ``[x, y, w, h]`` turned
into ``[x, y, x + w, y + h]``. Images without any ref stay in the split (they only contribute
negatives to phrase detection).
"""
import logging
import os
from collections import Counter, defaultdict

from detectron2.structures import BoxMode

from phrasedet.fileio import load_pickle_file
from phrasedet.text import nfc, normalize_phrase

from .common import BadAnnotationError, check_box, read_id_list, require_image_files
from .files import check_record, load_json_file, record_where

__all__ = ["load_referit", "REFERIT_SPLITS"]

logger = logging.getLogger(__name__)

# Which ref "split" values make up each split name.
REFERIT_SPLITS = {
    "train": ("train",),
    "val": ("val",),
    "trainval": ("train", "val"),
    "test": ("test",),
    "testA": ("testA",),
    "testB": ("testB",),
}


#: The keys read from each ref of ``refs(<split_by>).p``, and from each entry of ``images`` and
#: ``annotations`` of ``instances.json``, with their kinds (:data:`phrasedet.fileio.KINDS`).
_REF_KINDS = {"ref_id": "int_or_str", "ann_id": "int_or_str", "image_id": "int", "split": "str", "sentences": "list"}
_INSTANCES_KINDS = {
    "images": {"id": "int", "file_name": "str", "width": "positive", "height": "positive"},
    "annotations": {"id": "int_or_str", "bbox": "box4"},
}
#: A sentence's text: its ``raw`` key, else (missing or empty) its ``sent`` key.
_TEXT_KEYS = ("raw", "sent")


def _check_sentence(sent, where):
    """A sentence is a dict with a string ``raw`` or ``sent`` (both checked when present)."""
    check_record(sent, (), where)
    present = {key: "str" for key in _TEXT_KEYS if key in sent}
    if not present:
        raise BadAnnotationError(f"{where}: missing key 'raw' (or 'sent')")
    check_record(sent, present, where)


def _load_refs(path):
    """The refs of a REFER ``refs(<split_by>).p``, every key the loader reads checked; an error
    names the file, the ref (index and ``ref_id``), the sentence and the key."""
    refs = load_pickle_file(path, "ReferIt refs file", encoding="latin1")  # written by Python 2
    if not isinstance(refs, list):
        raise BadAnnotationError(f"{path}: expected a list of refs, got {type(refs).__name__}")
    for k, ref in enumerate(refs):
        where = record_where(path, "", k, ref, id_key="ref_id")
        check_record(ref, _REF_KINDS, where)
        for j, sent in enumerate(ref["sentences"]):
            _check_sentence(sent, f"{where}: sentences[{j}]")
    return refs


def _check_instances(path, data) -> None:
    """Every image and annotation record of ``instances.json`` has the keys the loader reads, of
    the right type; an error names the file, the record (index and id) and the key."""
    check_record(data, {part: "list" for part in _INSTANCES_KINDS}, f"{path}: top level")
    for part, kinds in _INSTANCES_KINDS.items():
        for k, rec in enumerate(data[part]):
            check_record(rec, kinds, record_where(path, part, k, rec))


def _load_instances(path):
    data = load_json_file(path, "ReferIt instances file")  # UTF-8 (a byte-order mark removed); errors name path:line:column
    _check_instances(path, data)
    return {im["id"]: im for im in data["images"]}, {a["id"]: a for a in data["annotations"]}


class _ImageFiles:
    """Resolves ``file_name`` under ``image_root``: directly, else by a one-time scan of the tree
    (saiapr_tc-12 keeps images in ``<dd>/images/<id>.jpg``)."""

    def __init__(self, image_root):
        self.image_root = image_root
        self._index = None

    def __call__(self, file_name):
        direct = os.path.join(self.image_root, file_name)
        if os.path.isfile(direct):
            return direct
        if self._index is None:
            self._index = {}
            for dirpath, _, files in os.walk(self.image_root):
                for name in files:
                    self._index.setdefault(name, os.path.join(dirpath, name))
        return self._index.get(os.path.basename(file_name), direct)


def _select_refs(refs, split, image_list):
    if image_list is not None:
        image_ids = read_id_list(image_list, as_int=True)
        keep = set(image_ids)
        return [r for r in refs if r["image_id"] in keep], image_ids
    if split not in REFERIT_SPLITS:
        raise KeyError(f"ReferIt split {split!r} unknown; choose from {sorted(REFERIT_SPLITS)}")
    chosen = [r for r in refs if r["split"] in REFERIT_SPLITS[split]]
    return chosen, sorted({r["image_id"] for r in chosen})


def _annotation(ref, sent_idx, sent, ann, img, where, box_policy, counts):
    raw = nfc((sent.get("raw") or sent.get("sent") or "").strip())
    if not raw:
        counts["empty_sentences"] += 1
        return None
    x, y, w, h = ann["bbox"]
    box, clipped = check_box([x, y, x + w, y + h], img["width"], img["height"], where, box_policy)
    counts["clipped_boxes"] += clipped
    return {
        "bbox": box,
        "bbox_mode": BoxMode.XYXY_ABS,
        "category_id": 0,
        "boxes": [box],
        "phrase": normalize_phrase(raw),
        "phrase_raw": raw,
        "phrase_types": [],
        "chain_id": str(ref["ann_id"]),
        "ref_id": ref["ref_id"],
        "ann_id": ref["ann_id"],
        "sent_id": sent.get("sent_id", sent_idx),
        "first_word_index": 0,
    }


def load_referit(
    refclef_root: str,
    image_root: str,
    split: str = "train",
    split_by: str = "berkeley",
    image_list: str = None,
    box_policy: str = "error",
    check_images: bool = True,
) -> list:
    """Load ReferIt (refclef) as Detectron2 dataset dicts (docs/DATA.md).

    Args:
        refclef_root: folder with ``refs(<split_by>).p`` and ``instances.json``.
        image_root: ``images/saiapr_tc-12`` of the REFER layout.
        split: ``train``, ``val``, ``trainval``, ``test`` (refs chosen by their ``split`` field).
        split_by: ``berkeley`` (Hu et al., used by paper 003) or ``unc``.
        image_list: a Hu et al. image list (``referit_test_imlist.txt``...); when given it
            decides the images instead of ``split``, and ids absent from ``instances.json`` are
            skipped and counted (the berkeley release misses 3 images).
        box_policy, check_images: as in :func:`load_flickr30k_entities`.

    Sentences with empty text are skipped and counted in the log.

    Raises:
        BadAnnotationError: naming the file and the record (``record <k> (ref_id <id>)`` of the
            refs, ``images[<k>] (id <id>)`` or ``annotations[<k>] (id <id>)`` of instances.json,
            ``path:line`` of the image list) and the key, for an unreadable file, a missing key
            or a value of the wrong type (ids, sizes, ``bbox``, sentence texts); a ref whose
            ``ann_id`` or ``image_id`` is not in instances.json; a box outside the image.
    """
    refs_path = os.path.join(refclef_root, f"refs({split_by}).p")
    inst_path = os.path.join(refclef_root, "instances.json")
    refs = _load_refs(refs_path)
    images, anns = _load_instances(inst_path)
    chosen, image_ids = _select_refs(refs, split, image_list)
    by_image = defaultdict(list)
    for ref in chosen:
        by_image[ref["image_id"]].append(ref)
    counts = Counter()
    resolve = _ImageFiles(image_root)
    records = []
    for image_id in image_ids:
        img = images.get(image_id)
        if img is None:
            if image_list is None:
                raise BadAnnotationError(f"{refs_path}: image_id {image_id} is not in {inst_path}")
            counts["images_not_in_instances"] += 1
            continue
        record = {
            "file_name": resolve(img["file_name"]),
            "image_id": str(image_id),
            "height": img["height"],
            "width": img["width"],
            "dataset": "referit",
            "captions": [],
            "unrelated_captions": [],
            "annotations": [],
            "unboxed_phrases": [],
        }
        for ref in by_image.get(image_id, ()):
            ann = anns.get(ref["ann_id"])
            if ann is None:
                raise BadAnnotationError(f"{refs_path}: ref_id {ref['ref_id']}: ann_id {ref['ann_id']} is not in {inst_path}")
            for k, sent in enumerate(ref["sentences"]):
                where = f"{inst_path}: annotation id {ann['id']} (ref_id {ref['ref_id']})"
                entry = _annotation(ref, k, sent, ann, img, where, box_policy, counts)
                if entry is not None:
                    entry["caption_index"] = len(record["captions"])
                    record["captions"].append(entry["phrase_raw"])
                    record["annotations"].append(entry)
        records.append(record)
    if check_images:
        require_image_files(records, "ReferIt")
    logger.info(
        "Loaded %d ReferIt images (%s, split %s%s): %d phrase instances; skipped %d empty sentences, "
        "%d listed images absent from instances.json; %d boxes clipped.",
        len(records), split_by, split, f", image list {image_list}" if image_list else "",
        sum(len(r["annotations"]) for r in records), counts["empty_sentences"],
        counts["images_not_in_instances"], counts["clipped_boxes"],
    )
    return records
