"""ReferIt Game (ReferItGame / refclef) from the REFER API layout.

``<refclef_root>/refs(<split_by>).p`` (a Python-2 pickle: a list of refs) and
``<refclef_root>/instances.json`` (COCO-style images and annotations). Each sentence of a ref is
one ground-truth (phrase, box) instance; the box is the ref's annotation ``[x, y, w, h]`` turned
into ``[x, y, x + w, y + h]``. Images without any ref stay in the split (they only contribute
negatives to phrase detection).
"""
import logging
import os
import pickle
from collections import Counter, defaultdict

from detectron2.structures import BoxMode

from phrasedet.text import normalize_phrase

from .common import BadAnnotationError, check_box, read_id_list, require_image_files
from .files import load_json_file, require_keys

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


def _load_refs(path):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"ReferIt refs file {path!r} does not exist")
    with open(path, "rb") as f:
        try:
            refs = pickle.load(f, encoding="latin1")  # written by Python 2
        except Exception as e:
            raise BadAnnotationError(f"{path}: cannot unpickle the refs: {e}") from None
    if not isinstance(refs, list):
        raise BadAnnotationError(f"{path}: expected a list of refs, got {type(refs).__name__}")
    for k, ref in enumerate(refs):
        missing = [key for key in ("ref_id", "ann_id", "image_id", "split", "sentences") if key not in ref]
        if missing:
            raise BadAnnotationError(f"{path}: ref #{k} lacks key(s) {missing}")
    return refs


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_instances(path, data) -> None:
    """Every image and annotation record of ``instances.json`` has the keys the loader reads, of
    the right type; an error names the file, the record (index and id) and the key."""
    require_keys(data, ("images", "annotations"), f"{path}: top level")
    for part, keys in (("images", ("id", "file_name", "width", "height")), ("annotations", ("id", "bbox"))):
        if not isinstance(data[part], list):
            raise BadAnnotationError(f"{path}: {part!r} must be a list, got {type(data[part]).__name__}")
        for k, rec in enumerate(data[part]):
            where = f"{path}: {part}[{k}]" + (f" (id {rec['id']!r})" if isinstance(rec, dict) and "id" in rec else "")
            require_keys(rec, keys, where)
            if part == "images" and not all(_is_number(rec[key]) and rec[key] > 0 for key in ("width", "height")):
                raise BadAnnotationError(f"{where}: 'width' and 'height' must be positive numbers, got "
                                         f"{rec['width']!r} and {rec['height']!r}")
            if part == "annotations" and not (isinstance(rec["bbox"], list) and len(rec["bbox"]) == 4
                                              and all(_is_number(v) for v in rec["bbox"])):
                raise BadAnnotationError(f"{where}: key 'bbox' must be 4 numbers [x, y, w, h], got {rec['bbox']!r}")


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
        keep = set(read_id_list(image_list))
        return [r for r in refs if str(r["image_id"]) in keep], [int(i) for i in read_id_list(image_list)]
    if split not in REFERIT_SPLITS:
        raise KeyError(f"ReferIt split {split!r} unknown; choose from {sorted(REFERIT_SPLITS)}")
    chosen = [r for r in refs if r["split"] in REFERIT_SPLITS[split]]
    return chosen, sorted({r["image_id"] for r in chosen})


def _annotation(ref, sent_idx, sent, ann, img, where, box_policy, counts):
    raw = (sent.get("raw") or sent.get("sent") or "").strip()
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
