"""Pointing-game records (paper 004): the record and query builders, and the conversion of
phrase-grounding records into pointing records.

A pointing split is a list of dicts, one per image (docs/DATA.md, "Pointing game")::

    {"file_name": str, "image_id": str, "height": int, "width": int, "dataset": str,
     "queries": [{"text": str,        # the natural-language text the model embeds
                  "phrase": str,      # normalized phrase (phrasedet.text.normalize_phrase)
                  "bbox": [x1, y1, x2, y2],  # floats, 0-based continuous, original image pixels
                  "bbox_mode": BoxMode.XYXY_ABS,
                  "query_id": str}],  # unique within the split
     ...}                             # extra keys allowed (e.g. "coco_id")

A query is a hit when the model's point lies inside ``bbox``. Images with no query are left out
of a split (counted in the loader's log).
"""
import logging
from collections import Counter

from detectron2.structures import BoxMode

__all__ = ["pointing_query", "pointing_record", "pointing_records_from_grounding", "QUERY_KEYS"]

logger = logging.getLogger(__name__)

#: The keys of every query, in this order.
QUERY_KEYS = ("text", "phrase", "bbox", "bbox_mode", "query_id")


def pointing_query(text, phrase, bbox, query_id):
    """One query: ``text`` to embed, its normalized ``phrase``, the ground-truth ``bbox``
    (0-based continuous XYXY_ABS, made floats) and its ``query_id`` (made a string)."""
    return {"text": text, "phrase": phrase, "bbox": [float(v) for v in bbox], "bbox_mode": BoxMode.XYXY_ABS,
            "query_id": str(query_id)}


def pointing_record(file_name, image_id, height, width, dataset, queries, **extra):
    """One image of a pointing split; ``extra`` keys (e.g. ``coco_id``) are added as they are."""
    return dict(file_name=file_name, image_id=str(image_id), height=int(height), width=int(width),
                dataset=dataset, queries=list(queries), **extra)


def _queries_of(record):
    """Every annotation of a grounding record as a query, ``query_id`` ``"<image_id>#<index>"``."""
    return [
        pointing_query(ann.get("phrase_raw", ann["phrase"]), ann["phrase"], ann["bbox"], f"{record['image_id']}#{k}")
        for k, ann in enumerate(record.get("annotations", ()))
    ]


def pointing_records_from_grounding(records, source="grounding records"):
    """Pointing records from phrase-grounding records (what :func:`load_flickr30k_entities` and
    :func:`load_referit` return), in the same order.

    Every annotation becomes one query: ``text`` is its ``phrase_raw`` when present, else its
    ``phrase``; ``phrase`` is its (normalized) ``phrase``; ``bbox`` its ``bbox`` (for a Flickr30K
    phrase with several boxes, their union box); ``query_id`` is ``"<image_id>#<k>"``, k the
    0-based index in the record's ``annotations``. Records keep ``file_name``, ``image_id``,
    ``height``, ``width`` and ``dataset``. Images without annotation are left out and counted in
    the log.

    Args:
        source: how the log names the records (e.g. the grounding split's name).

    Raises:
        ValueError: an image id appears twice (query ids would not be unique) or an annotation's
            ``bbox_mode`` is not ``XYXY_ABS``.
    """
    out, seen, counts = [], set(), Counter()
    for record in records:
        if record["image_id"] in seen:
            raise ValueError(f"{source}: image_id {record['image_id']!r} appears twice")
        seen.add(record["image_id"])
        modes = {ann.get("bbox_mode", BoxMode.XYXY_ABS) for ann in record.get("annotations", ())}
        if modes - {BoxMode.XYXY_ABS}:
            raise ValueError(f"{source}: image_id {record['image_id']!r} has boxes in {modes}, expected XYXY_ABS")
        queries = _queries_of(record)
        if not queries:
            counts["no_query"] += 1
            continue
        counts["queries"] += len(queries)
        out.append(pointing_record(record["file_name"], record["image_id"], record["height"], record["width"],
                                   record["dataset"], queries))
    logger.info(
        "Pointing records from %s: %d images, %d queries (one per annotation); %d images without "
        "annotation left out.", source, len(out), counts["queries"], counts["no_query"],
    )
    return out
