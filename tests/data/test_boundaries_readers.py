"""Boundary tests of the dataset readers (issue 14): boxes on and one pixel past each image edge,
one-pixel and empty boxes, the documented size/count limits (Visual Genome ``min_phrase_chars``,
COCO ``max_captions``, VSE++'s 5 captions per image, 1-based UNRELATED_CAPTIONS numbers) with the
record exactly at the limit and one on each side, and Unicode punctuation and spaces in captions
read through every caption reader.

Box convention (docs/DATA.md "Box convention"): Flickr30K Entities' 1-based inclusive pixels
``xmin..xmax`` become ``[xmin - 1, ymin - 1, xmax, ymax]``, so ``[0, 0, W, H]`` is the whole image;
ReferIt and Visual Genome ``[x, y, w, h]`` become ``[x, y, x + w, y + h]``. A box is inside when
``0 <= x1, 0 <= y1, x2 <= W, y2 <= H`` and empty when ``x2 <= x1`` or ``y2 <= y1``.
"""
import json
import os
import re

import pytest

from phrasedet.data.datasets import (
    BadAnnotationError,
    load_coco_karpathy,
    load_flickr30k_entities,
    load_flickr30k_entities_captions,
    load_flickr30k_karpathy,
    load_flickr30k_token_captions,
    load_referit,
    load_visual_genome_pointing,
    load_vsepp_precomp,
    parse_annotation_xml,
    parse_sentence_line,
    read_unrelated_captions,
)
from phrasedet.text import caption_words

from . import caption_fixtures as fx
from .flickr_fixture import CAPTIONS, write_flickr_root
from .test_referit import _write_refclef
from .test_visual_genome import write_vg_root

# ================================================================== Flickr30K Entities boxes

W, H = 333, 500  # the fixture image's <size>


def _xml(tmp_path, boxes, width=W, height=H):
    """An Annotations XML with one <object> (chain k + 1) per 1-based (xmin, ymin, xmax, ymax)."""
    objects = "".join(
        f"<object><name>{k + 1}</name><bndbox><xmin>{a}</xmin><ymin>{b}</ymin><xmax>{c}</xmax><ymax>{d}</ymax>"
        "</bndbox></object>" for k, (a, b, c, d) in enumerate(boxes)
    )
    path = tmp_path / "a.xml"
    path.write_text(f"<annotation><size><width>{width}</width><height>{height}</height><depth>3</depth></size>"
                    f"{objects}</annotation>", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    "pixels, box",
    [
        ((1, 1, W, H), [0.0, 0.0, 333.0, 500.0]),  # every pixel: [1-1, 1-1, 333, 500] = the whole image
        ((W, H, W, H), [332.0, 499.0, 333.0, 500.0]),  # the bottom-right pixel: touches the right and bottom edge
        ((1, 1, 1, 1), [0.0, 0.0, 1.0, 1.0]),  # the top-left pixel: a 1x1 box
        ((10, 20, 10, 20), [9.0, 19.0, 10.0, 20.0]),  # xmin == xmax: one pixel wide, not empty
    ],
)
def test_flickr_box_on_the_image_edges_and_one_pixel_boxes_are_kept_unclipped(tmp_path, pixels, box):
    for policy in ("error", "clip"):
        ann = parse_annotation_xml(_xml(tmp_path, [pixels]), box_policy=policy)
        assert ann.boxes == {"1": [box]}
        assert ann.clipped_boxes == 0  # on the edge is inside: nothing to clip


@pytest.mark.parametrize(
    "pixels, outside, clipped",
    [
        ((0, 1, 10, 10), "[-1, 0, 10, 10]", [0.0, 0.0, 10.0, 10.0]),  # xmin 0: one pixel left of the image
        ((1, 0, 10, 10), "[0, -1, 10, 10]", [0.0, 0.0, 10.0, 10.0]),  # ymin 0: one pixel above
        ((1, 1, W + 1, 10), "[0, 0, 334, 10]", [0.0, 0.0, 333.0, 10.0]),  # xmax W + 1: one past the right edge
        ((1, 1, 10, H + 1), "[0, 0, 10, 501]", [0.0, 0.0, 10.0, 500.0]),  # ymax H + 1: one past the bottom edge
    ],
)
def test_flickr_box_one_pixel_past_an_edge_is_an_error_or_clipped_and_counted(tmp_path, pixels, outside, clipped):
    path = _xml(tmp_path, [pixels])
    with pytest.raises(BadAnnotationError, match=r"a\.xml: <object> #1: box " + re.escape(outside)
                       + r" \(0-based xyxy\) lies outside the 333x500 image"):
        parse_annotation_xml(path)
    ann = parse_annotation_xml(path, box_policy="clip")
    assert ann.boxes == {"1": [clipped]} and ann.clipped_boxes == 1


@pytest.mark.parametrize(
    "pixels, empty",
    [
        ((11, 1, 10, 10), "[10, 0, 10, 10]"),  # xmax = xmin - 1: zero width
        ((1, 21, 10, 20), "[0, 20, 10, 20]"),  # ymax = ymin - 1: zero height
        ((W + 1, 1, W + 5, 10), "[333, 0, 333, 10]"),  # right of the image: clipped to zero width
    ],
)
def test_flickr_empty_box_is_an_error_under_both_policies(tmp_path, pixels, empty):
    path = _xml(tmp_path, [pixels])
    with pytest.raises(BadAnnotationError, match=r"a\.xml: <object> #1: empty box " + re.escape(empty)):
        parse_annotation_xml(path, box_policy="clip")
    with pytest.raises(BadAnnotationError, match=r"a\.xml: <object> #1: "):
        parse_annotation_xml(path)


# ================================================================== Flickr30K Entities UNRELATED_CAPTIONS


def test_unrelated_caption_numbers_are_1_based_so_0_is_an_error(tmp_path):
    path = fx.write_text(str(tmp_path / "UNRELATED_CAPTIONS"), ["# <imageID> <sentence number>", "1000092795 1"])
    assert read_unrelated_captions(path) == {"1000092795": {0}}  # sentence 1 -> caption index 0
    fx.write_text(path, ["1000092795 0"])
    with pytest.raises(BadAnnotationError, match=r"UNRELATED_CAPTIONS:1: expected '<image id> <sentence number>', got '1000092795 0'"):
        read_unrelated_captions(path)


def test_grounding_loader_accepts_the_last_caption_number_and_rejects_one_more(tmp_path):
    ann_root, image_root = write_flickr_root(str(tmp_path), write_image=False)
    split = os.path.join(ann_root, "train.txt")
    unrelated = fx.write_text(str(tmp_path / "UNRELATED_CAPTIONS"), ["1000092795 5"])  # 5 captions: the last one
    (record,) = load_flickr30k_entities(ann_root, image_root, split, unrelated, check_images=False)
    assert record["unrelated_captions"] == [4]
    fx.write_text(unrelated, ["1000092795 6"])  # one past the last caption
    with pytest.raises(BadAnnotationError, match=r"UNRELATED_CAPTIONS: image 1000092795 sentence 6 but .*Sentences/1000092795\.txt has 5 captions"):
        load_flickr30k_entities(ann_root, image_root, split, unrelated, check_images=False)


# ================================================================== Flickr30K Entities: Unicode in Sentences


def test_sentences_with_typographic_punctuation_and_nbsp(tmp_path):
    ann_root, image_root = write_flickr_root(str(tmp_path), write_image=False)
    line = "[/EN#1/people A man\u2019s] \u201cred\u201d\u00a0hat on [/EN#7/clothing a caf\u00e9\u00a0shirt] ."
    fx.write_text(os.path.join(ann_root, "Sentences", "1000092795.txt"), [line] + CAPTIONS[1:])
    # words: A man’s | “red” hat (the NBSP separates words) | on | a café shirt | . -> joined by single spaces
    caption, phrases = parse_sentence_line(line)
    assert caption == "A man\u2019s \u201cred\u201d hat on a caf\u00e9 shirt ."
    assert [(p.phrase, p.first_word_index) for p in phrases] == [("A man\u2019s", 0), ("a caf\u00e9 shirt", 5)]
    (record,) = load_flickr30k_entities(ann_root, image_root, os.path.join(ann_root, "train.txt"), check_images=False)
    assert record["captions"][0] == caption
    first = [(a["phrase"], a["phrase_raw"], a["first_word_index"]) for a in record["annotations"] if a["caption_index"] == 0]
    # "A man’s" -> a, man, ’, s -> ’ stripped, "a" and "s" stop words -> "man" (as "A man's");
    # "a café shirt" -> "café shirt" (accent kept)
    assert first == [("man", "A man\u2019s", 0), ("caf\u00e9 shirt", "a caf\u00e9 shirt", 5)]


# ================================================================== ReferIt boxes and sentences

IMAGE = 25123  # 100 x 80 in test_referit._write_refclef


def _referit(tmp_path, bboxes, sentences=None, **kw):
    """Load ``train`` with one ref per bbox (ann ids 1, 2, ...), each with ``sentences``."""
    instances = {"images": [{"id": IMAGE, "file_name": f"{IMAGE}.jpg", "width": 100, "height": 80},
                            {"id": 25124, "file_name": "25124.jpg", "width": 60, "height": 40}],
                 "annotations": [{"id": k + 1, "image_id": IMAGE, "bbox": b} for k, b in enumerate(bboxes)]}
    refs = [{"ref_id": 10 + k, "ann_id": k + 1, "image_id": IMAGE, "split": "train",
             "sentences": sentences or [{"sent_id": k, "raw": f"thing {k}"}]} for k in range(len(bboxes))]
    refclef, image_root = _write_refclef(str(tmp_path), refs=refs, instances=instances)
    return load_referit(refclef, image_root, "train", **kw)


def test_referit_box_touching_the_right_and_bottom_edge_and_a_one_pixel_box_are_kept(tmp_path, caplog):
    with caplog.at_level("INFO"):
        (record,) = _referit(tmp_path, [[0, 0, 100, 80], [99, 79, 1, 1], [10.5, 20, 89.5, 60]])
    # [x, y, x + w, y + h]: [0, 0, 100, 80] (the whole image), [99, 79, 100, 80] (bottom-right pixel),
    # [10.5, 20, 100, 80] (x + w = 10.5 + 89.5 = 100 = W exactly)
    assert [a["bbox"] for a in record["annotations"]] == [[0.0, 0.0, 100.0, 80.0], [99.0, 79.0, 100.0, 80.0],
                                                          [10.5, 20.0, 100.0, 80.0]]
    assert "0 boxes clipped" in caplog.text


@pytest.mark.parametrize(
    "bbox, outside, clipped",
    [
        ([1, 0, 100, 80], "[1, 0, 101, 80]", [1.0, 0.0, 100.0, 80.0]),  # x + w = 101 = W + 1
        ([0, 1, 100, 80], "[0, 1, 100, 81]", [0.0, 1.0, 100.0, 80.0]),  # y + h = 81 = H + 1
        ([0, 0, 100.5, 80], "[0, 0, 100.5, 80]", [0.0, 0.0, 100.0, 80.0]),  # half a pixel past the right edge
        ([-1, 0, 10, 10], "[-1, 0, 9, 10]", [0.0, 0.0, 9.0, 10.0]),  # one pixel left of the image
    ],
)
def test_referit_box_past_an_edge_is_an_error_or_clipped_and_counted(tmp_path, caplog, bbox, outside, clipped):
    with pytest.raises(BadAnnotationError, match=r"annotation id 1 \(ref_id 10\): box " + re.escape(outside)
                       + r" \(0-based xyxy\) lies outside the 100x80 image"):
        _referit(tmp_path, [bbox])
    with caplog.at_level("INFO"):
        (record,) = _referit(tmp_path, [bbox], box_policy="clip")
    assert record["annotations"][0]["bbox"] == clipped
    assert "1 boxes clipped" in caplog.text


@pytest.mark.parametrize("bbox, empty", [([10, 20, 0, 40], "[10, 20, 10, 60]"), ([10, 20, 30, 0], "[10, 20, 40, 20]")])
def test_referit_zero_width_or_height_box_is_an_error_even_when_clipping(tmp_path, bbox, empty):
    # not a documented counted skip for ReferIt (only empty sentences are): an error naming the record
    with pytest.raises(BadAnnotationError, match=r"annotation id 1 \(ref_id 10\): empty box " + re.escape(empty)):
        _referit(tmp_path, [bbox], box_policy="clip")


def test_referit_sentence_text_falls_back_to_sent_and_unicode_space_only_text_is_a_counted_skip(tmp_path, caplog):
    sentences = [
        {"sent_id": 1, "raw": "", "sent": "guy"},  # raw empty -> sent
        {"sent_id": 2, "sent": "man"},  # raw missing -> sent
        {"sent_id": 3, "raw": "\u00a0\u3000", "sent": ""},  # NBSP + ideographic space: stripped to "" -> skipped
        {"sent_id": 4, "raw": "\u00a0Man\u2019s \u201cred\u201d hat\u2009", "sent": "x"},  # ends stripped, kept as written
        {"sent_id": 5, "raw": "a"},  # one character: kept (no length limit; "a" alone keeps its stop word)
    ]
    with caplog.at_level("INFO"):
        (record,) = _referit(tmp_path, [[0, 0, 10, 10]], sentences=sentences)
    got = [(a["sent_id"], a["phrase_raw"], a["phrase"]) for a in record["annotations"]]
    # "Man’s “red” hat" -> man, ’, s, “, red, ”, hat -> punctuation stripped, "s" a stop word -> "man red hat"
    assert got == [(1, "guy", "guy"), (2, "man", "man"), (4, "Man\u2019s \u201cred\u201d hat", "man red hat"), (5, "a", "a")]
    assert record["captions"] == ["guy", "man", "Man\u2019s \u201cred\u201d hat", "a"]
    assert [a["caption_index"] for a in record["annotations"]] == [0, 1, 2, 3]
    assert "skipped 1 empty sentences" in caplog.text


# ================================================================== Visual Genome


def _vg_region(region_id, phrase, x, y, w, h):
    return {"region_id": region_id, "image_id": 1, "phrase": phrase, "x": x, "y": y, "width": w, "height": h}


# Image 1 of tests/data/test_visual_genome.py: 800 x 600, COCO val2014, its image file written.
VG_REGIONS = [
    _vg_region(101, "abc", 10, 10, 5, 5),  # 3 characters = min_phrase_chars: kept
    _vg_region(102, " a  b ", 10, 10, 5, 5),  # collapsed to "a b": 3 characters: kept
    _vg_region(103, "ab", 10, 10, 5, 5),  # 2 characters: short
    _vg_region(104, "\u00e9e", 10, 10, 5, 5),  # 2 characters (4 UTF-8 bytes): short
    _vg_region(105, "\u00e9t\u00e9", 10, 10, 5, 5),  # 3 characters: kept
    _vg_region(106, "\u00a0 \u3000", 10, 10, 5, 5),  # Unicode spaces only: empty
    _vg_region(119, "  ab  ", 10, 10, 5, 5),  # 6 characters as written, "ab" after stripping: short
    _vg_region(107, "one pixel", 0, 0, 1, 1),  # width = height = 1: kept [0, 0, 1, 1]
    _vg_region(108, "zero height", 0, 0, 5, 0),  # zero size
    _vg_region(120, "zero width", 5, 5, 0, 5),  # zero size
    _vg_region(109, "negative width", 0, 0, -1, 5),  # zero size
    _vg_region(110, "right edge", 700, 0, 100, 10),  # x + w = 800 = W: kept, not clipped
    _vg_region(111, "bottom edge", 0, 500, 10, 100),  # y + h = 600 = H: kept, not clipped
    _vg_region(112, "past bottom", 0, 500, 10, 101),  # y + h = 601: clipped to 600
    _vg_region(113, "starts at right edge", 800, 0, 10, 10),  # x = W: no pixel inside: outside
    _vg_region(114, "last column", 799, 0, 10, 10),  # one column inside: clipped to [799, 0, 800, 10]
    _vg_region(115, "ends at left edge", -10, 0, 10, 10),  # x + w = 0: outside
    _vg_region(116, "first column", -10, 0, 11, 10),  # x + w = 1: clipped to [0, 0, 1, 10]
    _vg_region(117, "starts at bottom edge", 0, 600, 10, 5),  # y = H: outside
    _vg_region(118, "ends at top edge", 0, -5, 10, 5),  # y + h = 0: outside
]


def _vg(tmp_path, regions, **kw):
    paths = write_vg_root(str(tmp_path), regions=[{"id": 1, "regions": regions}])
    return load_visual_genome_pointing(*paths[:4], **kw)


def test_vg_phrase_length_and_box_edges_with_every_skip_counted(tmp_path, caplog):
    with caplog.at_level("INFO"):
        (record,) = _vg(tmp_path, VG_REGIONS)
    got = [(q["query_id"], q["text"], q["bbox"]) for q in record["queries"]]
    assert got == [
        ("101", "abc", [10.0, 10.0, 15.0, 15.0]),
        ("102", "a b", [10.0, 10.0, 15.0, 15.0]),
        ("105", "\u00e9t\u00e9", [10.0, 10.0, 15.0, 15.0]),
        ("107", "one pixel", [0.0, 0.0, 1.0, 1.0]),
        ("110", "right edge", [700.0, 0.0, 800.0, 10.0]),
        ("111", "bottom edge", [0.0, 500.0, 10.0, 600.0]),
        ("112", "past bottom", [0.0, 500.0, 10.0, 600.0]),
        ("114", "last column", [799.0, 0.0, 800.0, 10.0]),
        ("116", "first column", [0.0, 0.0, 1.0, 10.0]),
    ]
    # "a b" -> a, b -> "a" is a stop word -> "b"; "one pixel" -> "pixel"
    assert [record["queries"][i]["phrase"] for i in (1, 3)] == ["b", "pixel"]
    # empty: 106; short: 103, 104, 119; zero size: 108, 120, 109; outside: 113, 115, 117, 118; clipped: 112, 114, 116
    assert ("Regions skipped: 1 empty phrases, 3 phrases shorter than 3 characters, 3 boxes of zero size, "
            "4 boxes entirely outside the image; 3 boxes clipped to the image (box_policy=clip).") in caplog.text


def test_vg_boxes_on_the_edge_pass_the_error_policy_and_one_pixel_past_does_not(tmp_path):
    on_edge = [r for r in VG_REGIONS if r["region_id"] in (107, 110, 111)]
    (record,) = _vg(tmp_path, on_edge, box_policy="error")
    assert [q["bbox"] for q in record["queries"]] == [[0.0, 0.0, 1.0, 1.0], [700.0, 0.0, 800.0, 10.0],
                                                      [0.0, 500.0, 10.0, 600.0]]
    with pytest.raises(BadAnnotationError, match=r"regions\[0\]: box \[0, 500, 10, 601\] \(0-based xyxy\) lies outside the 800x600"):
        _vg(tmp_path, [r for r in VG_REGIONS if r["region_id"] == 112], box_policy="error")


def test_vg_min_phrase_chars_boundaries(tmp_path, caplog):
    regions = [_vg_region(1, "a", 1, 1, 5, 5), _vg_region(2, "ab", 1, 1, 5, 5), _vg_region(3, "", 1, 1, 5, 5)]
    with caplog.at_level("INFO"):
        (two,) = _vg(tmp_path, regions, min_phrase_chars=2)
    assert [q["text"] for q in two["queries"]] == ["ab"]  # 2 characters = the limit: kept; 1: short
    assert "1 empty phrases, 1 phrases shorter than 2 characters" in caplog.text
    (zero,) = _vg(tmp_path, regions, min_phrase_chars=0)  # 0 is valid: no length limit, empty still skipped
    assert [q["text"] for q in zero["queries"]] == ["a", "ab"]
    with pytest.raises(ValueError, match="min_phrase_chars must be a non-negative integer, got -1"):
        _vg(tmp_path, regions, min_phrase_chars=-1)


# ================================================================== caption readers: Unicode

RAW = "A man\u2019s  \u201cred\u201d\u00a0caf\u00e9 hat ."  # two spaces and an NBSP between words
CLEAN = "A man\u2019s \u201cred\u201d caf\u00e9 hat ."  # whitespace runs collapsed to single spaces
WORDS = ["a", "man", "s", "red", "caf\u00e9", "hat"]  # caption_words: ’ “ ” and "." stripped, stop words kept


def _utf8_json(path, data):
    """JSON with the characters themselves as UTF-8 bytes (not \\u escapes), as many real files."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(json.dumps(data, ensure_ascii=False).encode("utf-8"))
    return path


def _entities_first(tmp_path):
    ann_root, image_root = write_flickr_root(str(tmp_path), write_image=False)
    fx.write_text(os.path.join(ann_root, "Sentences", "1000092795.txt"), [RAW] + CAPTIONS[1:])
    return load_flickr30k_entities_captions(ann_root, image_root, os.path.join(ann_root, "train.txt"))[0]["captions"][0]


def _token_first(tmp_path):
    path = fx.write_text(str(tmp_path / "results_20130124.token"), [f"1000092795.jpg#0\t{RAW}"])
    return load_flickr30k_token_captions(path, "/images")[0]["captions"][0]


def _karpathy_flickr_first(tmp_path):
    data = fx.karpathy_flickr()
    data["images"][0]["sentences"][0]["raw"] = RAW  # the train image
    path = _utf8_json(str(tmp_path / "dataset_flickr30k.json"), data)
    return load_flickr30k_karpathy(path, "/images", "train")[0]["captions"][0]


def _karpathy_coco_first(tmp_path):
    data = fx.karpathy_coco()
    data["images"][0]["sentences"][0]["raw"] = RAW  # 391895, the test image
    path = _utf8_json(str(tmp_path / "dataset_coco.json"), data)
    return load_coco_karpathy(path, "/coco", "test")[0]["captions"][0]


def _official_coco_first(tmp_path):
    _, karpathy, (train_file, val_file) = fx.write_coco_root(str(tmp_path))
    data = fx.official_coco("val2014")
    (ann,) = [a for a in data["annotations"] if a["id"] == 156]  # 391895's lowest annotation id: caption 0
    ann["caption"] = RAW
    _utf8_json(val_file, data)
    return load_coco_karpathy(karpathy, "/coco", "test", captions_files=(train_file, val_file))[0]["captions"][0]


def _precomp_first(tmp_path):
    fx.write_precomp(str(tmp_path), captions=[RAW] + fx.PRECOMP_CAPTIONS[1:])
    return load_vsepp_precomp(str(tmp_path), "test")[0]["captions"][0]


@pytest.mark.parametrize("read_first_caption", [
    _entities_first, _token_first, _karpathy_flickr_first, _karpathy_coco_first, _official_coco_first, _precomp_first,
])
def test_every_caption_reader_keeps_typographic_punctuation_and_collapses_unicode_spaces(tmp_path, read_first_caption):
    caption = read_first_caption(tmp_path)
    assert caption == CLEAN
    assert caption_words(caption) == WORDS


def test_unicode_line_separators_inside_a_caption_do_not_end_the_line(tmp_path):
    # Lines end at "\n" only (docs/DATA.md); U+2028, U+0085 and form feed are whitespace inside the
    # caption, collapsed to single spaces. Splitting at them would make the token file's first line
    # a caption without a key and the caps file 6 lines (not a multiple of 5).
    odd = "A dog\u2028runs\x85on\x0cgrass ."
    token = fx.write_text(str(tmp_path / "results_20130124.token"), [f"1000092795.jpg#0\t{odd}", "1000092795.jpg#1\tA cat ."])
    (record,) = load_flickr30k_token_captions(token, "/images")
    assert record["captions"] == ["A dog runs on grass .", "A cat ."]
    assert record["caption_ids"] == ["1000092795.jpg#0", "1000092795.jpg#1"]
    fx.write_precomp(str(tmp_path), rows=1, captions=[odd] + fx.FLICKR_1000092795[1:])
    (precomp,) = load_vsepp_precomp(str(tmp_path), "test")
    assert precomp["captions"][0] == "A dog runs on grass ." and precomp["caption_ids"] == ["0", "1", "2", "3", "4"]


# ================================================================== caption counts


@pytest.mark.parametrize("n_captions", [0, 4, 6, 11])
def test_precomp_caption_count_off_a_positive_multiple_of_5_is_an_error(tmp_path, n_captions):
    captions = (fx.PRECOMP_CAPTIONS * 2)[:n_captions]
    fx.write_precomp(str(tmp_path), rows=1, captions=captions)
    with pytest.raises(BadAnnotationError, match=rf"test_caps\.txt: {n_captions} captions is not a positive multiple of 5"):
        load_vsepp_precomp(str(tmp_path), "test")


@pytest.mark.parametrize("rows, step", [(1, 1), (5, 5)])
def test_precomp_exactly_5_captions_is_one_image(tmp_path, rows, step):
    # 5 captions: 1 image; 1 row = one per image, 5 rows = one per caption (feature_row = 5 * 0 = 0)
    fx.write_precomp(str(tmp_path), rows=rows, captions=fx.FLICKR_1000092795)
    (record,) = load_vsepp_precomp(str(tmp_path), "test")
    assert record["captions"] == fx.FLICKR_1000092795 and record["feature_row"] == 0
    fx.write_precomp(str(tmp_path), rows=rows + 1, captions=fx.FLICKR_1000092795)  # neither 1 nor 5 rows
    with pytest.raises(BadAnnotationError, match=rf"test_ims\.npy: {rows + 1} feature rows, but .*test_caps\.txt has 5 captions"):
        load_vsepp_precomp(str(tmp_path), "test")


def test_coco_max_captions_at_its_lowest_and_at_an_image_s_caption_count(tmp_path, caplog):
    _, karpathy, _ = fx.write_coco_root(str(tmp_path))
    with caplog.at_level("INFO"):
        (test,) = load_coco_karpathy(karpathy, "/coco", "test", max_captions=1)  # 1: the smallest valid value
    assert test["captions"] == [fx.COCO_391895[0].strip()] and test["caption_ids"] == ["770337"]
    assert "4 captions beyond max_captions=1 left out (from 1 images)" in caplog.text  # 5 - 1
    caplog.clear()
    with caplog.at_level("INFO"):
        restval, _ = load_coco_karpathy(karpathy, "/coco", "train", max_captions=6)
    assert len(restval["captions"]) == 6  # 522418 has exactly 6: all kept, none counted
    assert "0 captions beyond max_captions=6 left out (from 0 images)" in caplog.text
