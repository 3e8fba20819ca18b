"""Flickr30K Entities: the ``Sentences/*.txt`` markup parser, the ``Annotations/*.xml`` parser and the loader.

On-disk format: ../docs/DATA.md and Plummer et al.'s release. Each (caption, phrase) occurrence
whose chain has at least one box is one ground-truth instance (``annotations``), with the union
of the chain's boxes as its box; other occurrences stay in the record as ``unboxed_phrases``.
"""
import logging
import os
import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field

from detectron2.structures import BoxMode

from phrasedet.text import nfc, normalize_phrase

from .common import BadAnnotationError, check_box, read_id_list, require_image_files, union_box
from .files import read_text_lines

__all__ = [
    "SentencePhrase",
    "parse_sentence_line",
    "parse_sentences_file",
    "ImageAnnotation",
    "parse_annotation_xml",
    "read_unrelated_captions",
    "load_flickr30k_entities",
]

logger = logging.getLogger(__name__)

_TAG = re.compile(r"\[/EN#(\d+)((?:/[^\s/\]]+)+)\s")


@dataclass
class SentencePhrase:
    """One bracketed phrase of a caption."""

    phrase: str  # the words, as written
    chain_id: str
    types: list
    first_word_index: int  # 0-based, in the caption with markup stripped


def parse_sentence_line(line: str, where: str = "<string>"):
    """Parse one caption with ``[/EN#<chain>/<type>... words]`` markup.

    Returns:
        (caption, phrases): the caption with markup stripped (words joined by single spaces)
        and its list of :class:`SentencePhrase`, both in Unicode NFC.

    Raises:
        BadAnnotationError: naming ``where`` (e.g. ``"Sentences/1.txt:3"``) for an unclosed or
            nested bracket, a malformed tag, or an empty phrase.
    """
    line = nfc(line)  # columns in errors are those of the composed line
    words, phrases = [], []
    pos = 0
    while True:
        start = line.find("[", pos)
        stray = line.find("]", pos)
        if stray != -1 and (start == -1 or stray < start):
            raise BadAnnotationError(f"{where}: ']' without '[' at column {stray + 1}")
        if start == -1:
            words.extend(line[pos:].split())
            break
        words.extend(line[pos:start].split())
        m = _TAG.match(line, start)
        if m is None:
            raise BadAnnotationError(
                f"{where}: malformed phrase tag at column {start + 1}: {line[start:start + 30]!r}"
                " (expected '[/EN#<chain id>/<type> words]')"
            )
        end = line.find("]", m.end())
        if end == -1:
            raise BadAnnotationError(f"{where}: '[' at column {start + 1} is never closed")
        text = line[m.end():end]
        if "[" in text:
            raise BadAnnotationError(f"{where}: nested '[' inside the phrase at column {start + 1}")
        phrase_words = text.split()
        if not phrase_words:
            raise BadAnnotationError(f"{where}: empty phrase at column {start + 1}")
        phrases.append(SentencePhrase(" ".join(phrase_words), m.group(1), m.group(2)[1:].split("/"), len(words)))
        words.extend(phrase_words)
        pos = end + 1
    return " ".join(words), phrases


def parse_sentences_file(path: str):
    """All captions of one ``Sentences/<id>.txt``: a list of (caption, phrases), blank lines skipped."""
    lines = read_text_lines(path, "Sentences file")  # UTF-8, a byte-order mark removed; a bad byte names path:line
    return [parse_sentence_line(line, f"{path}:{n}") for n, line in enumerate(lines, 1) if line.strip()]


@dataclass
class ImageAnnotation:
    """Contents of one ``Annotations/<id>.xml``; boxes in 0-based continuous xyxy."""

    width: int
    height: int
    boxes: dict = field(default_factory=dict)  # chain id -> list of [x1, y1, x2, y2]
    scene: set = field(default_factory=set)
    nobox: set = field(default_factory=set)
    clipped_boxes: int = 0


def _int_field(elem, tag, path):
    child = elem.find(tag)
    if child is None or child.text is None:
        raise BadAnnotationError(f"{path}: missing <{tag}>")
    try:
        return int(float(child.text.strip()))
    except ValueError:
        raise BadAnnotationError(f"{path}: <{tag}> is not a number: {child.text!r}") from None


def parse_annotation_xml(path: str, box_policy: str = "error") -> ImageAnnotation:
    """Parse one ``Annotations/<id>.xml``.

    Coordinates in the file are 1-based inclusive pixels; a box over pixels ``xmin..xmax``
    becomes ``[xmin - 1, ymin - 1, xmax, ymax]`` (see docs/DATA.md).

    Args:
        box_policy: ``"error"``: a box outside the image raises; ``"clip"``: it is clipped to the
            image and counted in ``clipped_boxes``.
    """
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        raise BadAnnotationError(f"{path}: cannot parse XML: {e}") from None
    size = root.find("size")
    if size is None:
        raise BadAnnotationError(f"{path}: missing <size> (needed for the image width and height)")
    ann = ImageAnnotation(_int_field(size, "width", path), _int_field(size, "height", path))
    for k, obj in enumerate(root.iter("object"), 1):
        where = f"{path}: <object> #{k}"
        names = [n.text.strip() for n in obj.findall("name") if n.text and n.text.strip()]
        if not names:
            raise BadAnnotationError(f"{where}: no <name> (chain id)")
        bndbox = obj.find("bndbox")
        if bndbox is not None:
            xmin, ymin, xmax, ymax = (_int_field(bndbox, t, where) for t in ("xmin", "ymin", "xmax", "ymax"))
            box, clipped = check_box([xmin - 1, ymin - 1, xmax, ymax], ann.width, ann.height, where, box_policy)
            ann.clipped_boxes += clipped
            for name in names:
                ann.boxes.setdefault(name, []).append(box)
        if (obj.findtext("scene") or "0").strip() == "1":
            ann.scene.update(names)
        if (obj.findtext("nobndbox") or "0").strip() == "1":
            ann.nobox.update(names)
    return ann


def read_unrelated_captions(path: str) -> dict:
    """``UNRELATED_CAPTIONS``: image id -> set of 0-based caption indices (the file is 1-based)."""
    out = {}
    for n, line in enumerate(read_text_lines(path, "UNRELATED_CAPTIONS file"), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit() or int(parts[1]) < 1:
            raise BadAnnotationError(f"{path}:{n}: expected '<image id> <sentence number>', got {line!r}")
        out.setdefault(parts[0], set()).add(int(parts[1]) - 1)
    return out


def _unboxed_reason(chain_id, types, ann):
    if chain_id == "0" or "notvisual" in types:
        return "notvisual"
    if chain_id in ann.boxes:
        return None
    if chain_id in ann.scene:
        return "scene"
    if chain_id in ann.nobox:
        return "nobox"
    return "unannotated"


def _image_record(image_id, ann_root, image_root, unrelated, box_policy, counts):
    sent_path = os.path.join(ann_root, "Sentences", f"{image_id}.txt")
    xml_path = os.path.join(ann_root, "Annotations", f"{image_id}.xml")
    for p in (sent_path, xml_path):
        if not os.path.isfile(p):
            raise FileNotFoundError(f"Flickr30K Entities: image {image_id} is in the split list but {p} does not exist")
    captions = parse_sentences_file(sent_path)
    ann = parse_annotation_xml(xml_path, box_policy)
    counts["clipped_boxes"] += ann.clipped_boxes
    bad = sorted(i for i in unrelated if i >= len(captions))
    if bad:
        raise BadAnnotationError(
            f"UNRELATED_CAPTIONS: image {image_id} sentence {bad[0] + 1} but {sent_path} has {len(captions)} captions"
        )
    record = {
        "file_name": os.path.join(image_root, f"{image_id}.jpg"),
        "image_id": image_id,
        "height": ann.height,
        "width": ann.width,
        "dataset": "flickr30k_entities",
        "captions": [c for c, _ in captions],
        "unrelated_captions": sorted(unrelated),
        "annotations": [],
        "unboxed_phrases": [],
    }
    for cap_idx, (_, phrases) in enumerate(captions):
        for p in phrases:
            entry = {
                "phrase": normalize_phrase(p.phrase),
                "phrase_raw": p.phrase,
                "phrase_types": p.types,
                "chain_id": p.chain_id,
                "caption_index": cap_idx,
                "first_word_index": p.first_word_index,
            }
            if cap_idx in unrelated:
                counts["unrelated_caption_phrases"] += 1
                continue
            reason = _unboxed_reason(p.chain_id, p.types, ann)
            if reason is None:
                boxes = ann.boxes[p.chain_id]
                entry.update(bbox=union_box(boxes), bbox_mode=BoxMode.XYXY_ABS, category_id=0, boxes=boxes)
                record["annotations"].append(entry)
                counts["box_targets"] += 1
            else:
                entry["reason"] = reason
                record["unboxed_phrases"].append(entry)
                counts[reason] += 1
    return record


def load_flickr30k_entities(
    ann_root: str,
    image_root: str,
    split_file: str,
    unrelated_captions_file: str = None,
    box_policy: str = "error",
    check_images: bool = True,
) -> list:
    """Load one split of Flickr30K Entities as Detectron2 dataset dicts (docs/DATA.md).

    Args:
        ann_root: folder holding ``Sentences/`` and ``Annotations/``.
        image_root: folder holding ``<id>.jpg``.
        split_file: one image id per line (``train.txt``, ``val.txt``, ``test.txt``).
        unrelated_captions_file: ``UNRELATED_CAPTIONS``; phrases of those captions are skipped
            (counted in the log). ``None``: none skipped.
        box_policy: ``"error"`` or ``"clip"`` for boxes outside the image (see
            :func:`parse_annotation_xml`).
        check_images: raise ``FileNotFoundError`` naming a missing image file at load time
            (``False``: only annotations are needed, e.g. to evaluate a predictions file).
    """
    if not os.path.isdir(ann_root):
        raise FileNotFoundError(f"Flickr30K Entities root {ann_root!r} does not exist")
    ids = read_id_list(split_file)
    unrelated = read_unrelated_captions(unrelated_captions_file) if unrelated_captions_file else {}
    counts = Counter()
    records = [
        _image_record(i, ann_root, image_root, unrelated.get(i, set()), box_policy, counts) for i in ids
    ]
    if check_images:
        require_image_files(records, "Flickr30K Entities")
    logger.info(
        "Loaded %d images of %s: %d box-target phrase occurrences; not box targets: %d notvisual, "
        "%d scene-only, %d nobndbox, %d chain not in the XML; %d phrases of unrelated captions "
        "skipped; %d boxes clipped to the image.",
        len(records), split_file, counts["box_targets"], counts["notvisual"], counts["scene"],
        counts["nobox"], counts["unannotated"], counts["unrelated_caption_phrases"], counts["clipped_boxes"],
    )
    return records
