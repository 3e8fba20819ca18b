"""Visual Genome region descriptions as pointing-game records (paper 004, Xiao et al.'s protocol).

Files (Visual Genome v1.2 release)::

    region_descriptions.json   [{"id": <image id>, "regions": [{"region_id": 1382, "image_id": 1,
                                  "phrase": "the clock is green in colour", "x": 421, "y": 57,
                                  "width": 82, "height": 139}, ...]}, ...]
    image_data.json            [{"image_id": 1, "coco_id": null | <COCO id>, "width": 800,
                                  "height": 600, "url": "https://cs.stanford.edu/people/rak248/VG_100K_2/1.jpg"}, ...]
    <image_root>/VG_100K/<image id>.jpg, <image_root>/VG_100K_2/<image id>.jpg

plus any COCO json with ``"images": [{"id": ...}]`` naming the COCO val2014 images
(``captions_val2014.json``, ``instances_val2014.json``) and, optionally, Karpathy's
``dataset_coco.json`` to leave out images the retrieval model trained on.

The two VG files are joined **by image id**: the released pointing-game code pairs them by list
position, which is only right when both list the images in the same order. Region boxes
``(x, y, width, height)`` become ``[x, y, x + width, y + height]`` (0-based continuous XYXY_ABS).
Every filter and skip is counted in one log line (docs/DATA.md, "Pointing game").
"""
import functools
import logging
import os
from collections import Counter, namedtuple
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

from phrasedet.text import nfc, normalize_phrase

from .common import BadAnnotationError, check_box, require_image_files
from .files import check_record, load_json_file, record_where
from .karpathy import KARPATHY_SPLITS, read_karpathy_split
from .pointing import pointing_query, pointing_record

__all__ = ["VGImage", "read_vg_image_data", "read_coco_image_ids", "load_visual_genome_pointing"]

logger = logging.getLogger(__name__)

DATASET = "visual_genome"

#: The keys read from each entry of image_data.json, of region_descriptions.json and of its
#: ``regions``, with their kinds (:data:`phrasedet.fileio.KINDS`); ``coco_id`` is also null.
_IMAGE_KINDS = {"image_id": "int", "coco_id": "any", "width": "int", "height": "int", "url": "str"}
_ENTRY_KINDS = {"id": "int", "regions": "list"}
_REGION_KINDS = {"region_id": "int", "image_id": "any", "phrase": "str", "x": "finite", "y": "finite",
                 "width": "finite", "height": "finite"}
_Options = namedtuple("_Options", "min_phrase_chars box_policy normalize")


@dataclass(frozen=True)
class VGImage:
    """One entry of ``image_data.json``; ``folder``/``file`` are the url's last two path parts."""

    index: int  # position in image_data.json, for error messages
    image_id: int
    coco_id: Optional[int]
    width: int
    height: int
    folder: str  # "VG_100K" or "VG_100K_2"
    file: str  # "<image id>.jpg"


def _url_parts(image, where):
    """(folder, file) from the url's last two path parts, the file being ``<image_id>.jpg``."""
    url = image["url"]
    try:
        parts = [p for p in urlsplit(url).path.split("/") if p]
    except ValueError as e:  # e.g. "Invalid IPv6 URL" for an unmatched bracket
        raise BadAnnotationError(f"{where}: key 'url' {url!r} is not a URL: {e}") from None
    if len(parts) < 2 or parts[-1] != f"{image['image_id']}.jpg":
        raise BadAnnotationError(
            f"{where}: key 'url' {url!r} does not end in '<folder>/{image['image_id']}.jpg'"
        )
    return parts[-2], parts[-1]


def _vg_image(image, k, path):
    """Entry ``k`` of image_data.json as a :class:`VGImage`, every key checked."""
    where = f"{path}: [{k}]"
    check_record(image, _IMAGE_KINDS, where)
    if image["coco_id"] is not None:
        check_record(image, {"coco_id": "int"}, where)
    width, height = image["width"], image["height"]
    if width <= 0 or height <= 0:
        raise BadAnnotationError(f"{where}: image size {width}x{height} is not positive")
    return VGImage(k, image["image_id"], image["coco_id"], width, height, *_url_parts(image, where))


def _json_list(path, what):
    data = load_json_file(path, what)
    if not isinstance(data, list):
        raise BadAnnotationError(f"{path}: expected a JSON list, got {type(data).__name__}")
    return data


def read_vg_image_data(path):
    """``image_data.json`` as image id -> :class:`VGImage`.

    Raises:
        BadAnnotationError: naming the file, the list index and the key, for a missing key, a
            wrong type, a non-positive size, a url not ending in ``<folder>/<image_id>.jpg`` or
            an image id listed twice.
    """
    images = {}
    for k, entry in enumerate(_json_list(path, "Visual Genome image_data.json")):
        image = _vg_image(entry, k, path)
        if image.image_id in images:
            raise BadAnnotationError(
                f"{path}: [{k}]: key 'image_id' {image.image_id} already at [{images[image.image_id].index}]"
            )
        images[image.image_id] = image
    return images


def read_coco_image_ids(path):
    """The ``id`` (an integer) of every entry of ``images`` in a COCO json (captions or instances file)."""
    data = check_record(load_json_file(path, "COCO annotation file"), {"images": "list"}, path)
    ids = set()
    for k, image in enumerate(data["images"]):
        check_record(image, {"id": "int"}, record_where(path, "images", k, image))
        ids.add(image["id"])
    return ids


def _karpathy_splits(path, exclude_splits):
    """cocoid -> Karpathy split of ``dataset_coco.json``; ``{}`` when ``path`` is ``None``."""
    unknown = [s for s in exclude_splits if s not in KARPATHY_SPLITS]
    if unknown:
        raise ValueError(f"exclude_splits {unknown} unknown; choose from {list(KARPATHY_SPLITS)}")
    if path is None:
        return {}
    return {image.cocoid: image.split for image in read_karpathy_split(path, coco=True)}


def _region_fields(region, where, image):
    """(region_id, phrase in Unicode NFC with whitespace runs collapsed, [x, y, width, height]), every
    key checked."""
    check_record(region, _REGION_KINDS, where)
    if region["image_id"] != image.image_id:
        raise BadAnnotationError(
            f"{where}: key 'image_id' is {region['image_id']!r} but the entry's 'id' is {image.image_id}"
        )
    xywh = [region[key] for key in ("x", "y", "width", "height")]
    return region["region_id"], " ".join(nfc(region["phrase"]).split()), xywh


def _phrase_skip(text, min_phrase_chars):
    """Why a phrase is skipped (``"empty_phrases"``, ``"short_phrases"``), or ``None``."""
    if not text:
        return "empty_phrases"
    return "short_phrases" if len(text) < min_phrase_chars else None


def _region_box(xywh, image, where, box_policy, counts):
    """The xyxy box checked against the image, or ``None`` (counted) when it is empty or, when
    clipping, entirely outside the image."""
    x, y, w, h = xywh
    if w <= 0 or h <= 0:
        counts["zero_size_boxes"] += 1
        return None
    box = [x, y, x + w, y + h]
    if box_policy == "clip" and (min(box[2], image.width) <= max(x, 0) or min(box[3], image.height) <= max(y, 0)):
        counts["boxes_outside"] += 1
        return None
    box, clipped = check_box(box, image.width, image.height, where, box_policy)
    counts["clipped_boxes"] += clipped
    return box


def _region_query(region, where, image, options, counts):
    """One region as a query (``query_id`` = its ``region_id``), or ``None`` when it is skipped
    (phrase checked first, then the box)."""
    region_id, text, xywh = _region_fields(region, where, image)
    skip = _phrase_skip(text, options.min_phrase_chars)
    if skip is not None:
        counts[skip] += 1
        return None
    box = _region_box(xywh, image, where, options.box_policy, counts)
    return None if box is None else pointing_query(text, options.normalize(text), box, region_id)


def _select(image, coco_val_ids, karpathy, exclude_splits, counts):
    """Why an image (a :class:`VGImage` or ``None``) is left out, or ``None`` to keep it."""
    if image is None:
        return "not_in_image_data"
    if image.coco_id is None:
        return "no_coco_id"
    if image.coco_id not in coco_val_ids:
        return "not_in_coco_val"
    if karpathy:
        split = karpathy.get(image.coco_id)
        if split is None:
            counts["not_in_karpathy"] += 1
        elif split in exclude_splits:
            return "karpathy_excluded"
    return None


def _entry(entry, k, path, seen):
    """(image id, regions) of one entry of region_descriptions.json, checked."""
    where = f"{path}: [{k}]"
    check_record(entry, _ENTRY_KINDS, where)
    image_id = entry["id"]
    if image_id in seen:
        raise BadAnnotationError(f"{where}: key 'id' {image_id} already at [{seen[image_id]}]")
    seen[image_id] = k
    return image_id, entry["regions"]


def _image_record(image, regions, where, image_root, options, query_ids, counts):
    queries = []
    for j, region in enumerate(regions):
        at = f"{where}.regions[{j}]"
        query = _region_query(region, at, image, options, counts)
        if query is None:
            continue
        first = query_ids.setdefault(query["query_id"], (where, j))  # the entry's string is shared, not copied
        if first != (where, j):
            raise BadAnnotationError(
                f"{at}: key 'region_id' {query['query_id']} already at {first[0]}.regions[{first[1]}]"
            )
        queries.append(query)
    counts["regions_of_selected"] += len(regions)
    return pointing_record(os.path.join(image_root, image.folder, image.file), image.image_id, image.height,
                           image.width, DATASET, queries, coco_id=image.coco_id)


def _options(min_phrase_chars, box_policy):
    """The checked options, with a ``normalize_phrase`` memoized for this load (VG repeats phrases)."""
    if isinstance(min_phrase_chars, bool) or not isinstance(min_phrase_chars, int) or min_phrase_chars < 0:
        raise ValueError(f"min_phrase_chars must be a non-negative integer, got {min_phrase_chars!r}")
    if box_policy not in ("error", "clip"):
        raise ValueError(f"box policy must be 'error' or 'clip', got {box_policy!r}")
    return _Options(min_phrase_chars, box_policy, functools.lru_cache(maxsize=None)(normalize_phrase))


def load_visual_genome_pointing(
    region_descriptions_json: str,
    image_data_json: str,
    image_root: str,
    coco_images_json: str,
    exclude_karpathy_json: Optional[str] = None,
    exclude_splits: tuple = ("train", "restval"),
    min_phrase_chars: int = 3,
    box_policy: str = "clip",
    check_images: bool = True,
) -> list:
    """The pointing-game split of Visual Genome: its images that are in COCO val2014, every
    region description a query (pointing records, :mod:`.pointing`), in region_descriptions order.

    Args:
        region_descriptions_json, image_data_json: the VG files, joined by image id. An image of
            region_descriptions.json absent from image_data.json is skipped and counted.
        image_root: folder holding ``VG_100K/`` and ``VG_100K_2/``; ``file_name`` is
            ``image_root/<folder>/<image_id>.jpg``, the folder taken from the image's url.
        coco_images_json: a COCO val2014 json with ``"images": [{"id"}]``; images whose
            ``coco_id`` is null or not among those ids are left out (counted). The paper keeps
            17,471 images with 865,582 regions.
        exclude_karpathy_json: Karpathy's ``dataset_coco.json``; when given, images whose cocoid
            has a split in ``exclude_splits`` are left out (counted): with the default, the rVal
            training images (``train``, ``restval``), which overlap the paper's evaluation.
            Images missing from the file are kept (counted).
        min_phrase_chars: regions whose phrase (whitespace runs collapsed, ends stripped) is empty
            or shorter than this many characters are skipped (counted, separately).
        box_policy: ``"clip"`` clips boxes sticking out of the image (counted; a box entirely
            outside is skipped and counted); ``"error"`` raises for them. Boxes of zero or
            negative width or height are skipped and counted under both policies.
        check_images: raise ``FileNotFoundError`` naming a missing image file at load time, as
            the grounding loaders do (``False``: only the annotations are needed).

    Records have the extra key ``coco_id``; ``query_id`` is the region's ``region_id``. Images
    left with no query are left out (counted). The regions of an image left out by the COCO or
    Karpathy filter are not read (their errors go unreported); every region of a kept image is
    checked, skipped ones included.

    Raises:
        BadAnnotationError: naming the file, the list index (``[k].regions[j]``) and the key, for
            a missing key, a wrong type, an id listed twice, or a region whose ``image_id`` is
            not its entry's ``id``.
    """
    options = _options(min_phrase_chars, box_policy)
    exclude_splits = tuple(exclude_splits)
    karpathy = _karpathy_splits(exclude_karpathy_json, exclude_splits)
    images = read_vg_image_data(image_data_json)
    coco_val_ids = read_coco_image_ids(coco_images_json)
    entries = _json_list(region_descriptions_json, "Visual Genome region_descriptions.json")
    counts, seen, query_ids, records = Counter(), {}, {}, []
    for k, entry in enumerate(entries):
        image_id, regions = _entry(entry, k, region_descriptions_json, seen)
        reason = _select(images.get(image_id), coco_val_ids, karpathy, exclude_splits, counts)
        if reason is not None:
            counts[reason] += 1
            continue
        record = _image_record(images[image_id], regions, f"{region_descriptions_json}: [{k}]", image_root,
                               options, query_ids, counts)
        if record["queries"]:
            records.append(record)
        else:
            counts["no_query"] += 1
    if check_images:
        require_image_files(records, "Visual Genome")
    _log_summary(records, len(entries), counts, region_descriptions_json, coco_images_json,
                 exclude_karpathy_json, exclude_splits, options)
    return records


def _log_summary(records, n_entries, counts, regions_json, coco_json, karpathy_json, exclude_splits, options):
    excluded = (f"{counts['karpathy_excluded']} whose cocoid is in Karpathy split(s) {', '.join(exclude_splits)} of "
                f"{karpathy_json} ({counts['not_in_karpathy']} images absent from that file kept)"
                if karpathy_json else "no Karpathy exclusion")
    logger.info(
        "Loaded %d Visual Genome images for the pointing game: %d regions kept as queries; %d regions in "
        "the %d selected images (paper: 865,582 in 17,471). Of %d images of %s, left out: %d not in "
        "image_data.json, %d without coco_id, %d whose coco_id is not in %s, %s, %d with no region left. "
        "Regions skipped: %d empty phrases, %d phrases shorter than %d characters, %d boxes of zero size, "
        "%d boxes entirely outside the image; %d boxes clipped to the image (box_policy=%s).",
        len(records), sum(len(r["queries"]) for r in records), counts["regions_of_selected"],
        len(records) + counts["no_query"], n_entries, regions_json, counts["not_in_image_data"],
        counts["no_coco_id"], counts["not_in_coco_val"], coco_json, excluded, counts["no_query"],
        counts["empty_phrases"], counts["short_phrases"], options.min_phrase_chars, counts["zero_size_boxes"],
        counts["boxes_outside"], counts["clipped_boxes"], options.box_policy,
    )
