import os
import re

import pytest
from detectron2.structures import BoxMode

from phrasedet.data.datasets import (
    BadAnnotationError,
    load_flickr30k_entities,
    parse_annotation_xml,
    parse_sentence_line,
)

from .flickr_fixture import CAPTIONS, XML, write_flickr_root


def _load(tmp_path, **kw):
    ann_root, image_root = write_flickr_root(str(tmp_path), **{k: v for k, v in kw.items() if k in ("captions", "xml", "write_image")})
    extra = {k: v for k, v in kw.items() if k in ("unrelated_captions_file", "box_policy")}
    return load_flickr30k_entities(ann_root, image_root, os.path.join(ann_root, "train.txt"), **extra)


EXPECTED_PHRASES = [
    [("Two young guys", "1", ["people"], 0), ("shaggy hair", "2", ["bodyparts"], 4),
     ("their hands", "3", ["bodyparts"], 8), ("the yard", "8", ["scene"], 14)],
    [("Two young , White males", "1", ["people"], 0), ("many bushes", "4", ["scene"], 8)],
    [("Two men", "1", ["people"], 0), ("green shirts", "5", ["clothing"], 3), ("a yard", "9", ["scene"], 8)],
    [("A man", "6", ["people"], 0), ("a blue shirt", "7", ["clothing"], 3), ("a garden", "9", ["scene"], 8)],
    [("Two friends", "1", ["people"], 0), ("time", "10", ["other"], 3)],
]


@pytest.mark.parametrize("line, expected", list(zip(CAPTIONS, EXPECTED_PHRASES)))
def test_real_caption_lines_parse_exactly(line, expected):
    caption, phrases = parse_sentence_line(line)
    assert [(p.phrase, p.chain_id, p.types, p.first_word_index) for p in phrases] == expected
    words = caption.split()
    for p in phrases:  # first_word_index points at the phrase in the stripped caption
        assert " ".join(words[p.first_word_index:p.first_word_index + len(p.phrase.split())]) == p.phrase


def test_stripped_caption_and_multi_type_tag():
    caption, phrases = parse_sentence_line("[/EN#255545/bodyparts/people a man 's arm] waves .")
    assert caption == "a man 's arm waves ."
    assert phrases[0].types == ["bodyparts", "people"] and phrases[0].chain_id == "255545"


def test_annotation_xml_boxes_are_0_based_continuous(tmp_path):
    path = tmp_path / "a.xml"
    path.write_text(XML)
    ann = parse_annotation_xml(str(path))
    assert (ann.width, ann.height) == (333, 500)
    shared = [158.0, 124.0, 219.0, 335.0]  # 1-based inclusive 159..219 -> [158, 219)
    assert ann.boxes["1"] == [shared, [20.0, 100.0, 120.0, 400.0]]
    assert ann.boxes["6"] == [shared]
    assert ann.boxes["4"] == [[0.0, 0.0, 100.0, 80.0], [249.0, 9.0, 333.0, 90.0]]
    assert ann.scene == {"8", "9"} and ann.nobox == {"10"}


def test_record_instances_union_boxes_and_flags(tmp_path):
    (record,) = _load(tmp_path)
    assert record["image_id"] == "1000092795" and (record["width"], record["height"]) == (333, 500)
    assert record["file_name"].endswith("flickr30k-images/1000092795.jpg")
    anns = record["annotations"]
    got = [(a["caption_index"], a["chain_id"], a["phrase"], a["bbox"]) for a in anns]
    chain1_union = [20.0, 100.0, 219.0, 400.0]
    assert got == [
        (0, "1", "two young guys", chain1_union),
        (0, "2", "shaggy hair", [29.0, 100.0, 90.0, 140.0]),
        (0, "3", "hands", [59.0, 199.0, 100.0, 240.0]),
        (1, "1", "two young white males", chain1_union),
        (1, "4", "many bushes", [0.0, 0.0, 333.0, 90.0]),  # a scene-typed chain with boxes is a target
        (2, "1", "two men", chain1_union),
        (2, "5", "green shirts", [24.0, 149.0, 215.0, 250.0]),
        (3, "6", "man", [158.0, 124.0, 219.0, 335.0]),
        (3, "7", "blue shirt", [159.0, 149.0, 215.0, 250.0]),
        (4, "1", "two friends", chain1_union),
    ]
    assert all(a["bbox_mode"] == BoxMode.XYXY_ABS and a["category_id"] == 0 for a in anns)
    assert anns[0]["boxes"] == [[158.0, 124.0, 219.0, 335.0], [20.0, 100.0, 120.0, 400.0]]
    assert anns[3]["phrase_raw"] == "Two young , White males"
    unboxed = [(u["caption_index"], u["chain_id"], u["phrase_raw"], u["reason"]) for u in record["unboxed_phrases"]]
    assert unboxed == [
        (0, "8", "the yard", "scene"),
        (2, "9", "a yard", "scene"),
        (3, "9", "a garden", "scene"),
        (4, "10", "time", "nobox"),
    ]
    assert record["captions"][4] == "Two friends enjoy time spent together ."


def test_notvisual_and_unannotated_chains(tmp_path):
    caps = ["[/EN#0/notvisual This picture] shows [/EN#1/people two men] near [/EN#99/other a dog] ."]
    (record,) = _load(tmp_path, captions=caps)
    assert [a["chain_id"] for a in record["annotations"]] == ["1"]
    assert [(u["chain_id"], u["reason"]) for u in record["unboxed_phrases"]] == [("0", "notvisual"), ("99", "unannotated")]


def test_unrelated_captions_are_honoured(tmp_path, caplog):
    unrelated = tmp_path / "UNRELATED_CAPTIONS"
    unrelated.write_text("# format: <imageID> <sentence number>\n1000092795 5\n")
    with caplog.at_level("INFO"):
        (record,) = _load(tmp_path, unrelated_captions_file=str(unrelated))
    assert record["unrelated_captions"] == [4]
    assert all(a["caption_index"] != 4 for a in record["annotations"] + record["unboxed_phrases"])
    assert len(record["annotations"]) == 9
    assert "2 phrases of unrelated captions skipped" in caplog.text


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("[/EN#1/people Two guys look at the sky .", "never closed"),
        ("[EN#1 people Two guys] look .", "malformed phrase tag"),
        ("Two guys] look .", "']' without '['"),
        ("[/EN#1/people ] look .", "empty phrase"),
        ("[/EN#1/people Two [/EN#2/other guys] ] look .", "nested"),
    ],
)
def test_malformed_markup_names_file_and_line(tmp_path, bad_line, message):
    caps = list(CAPTIONS)
    caps[2] = bad_line
    with pytest.raises(BadAnnotationError, match=re.escape(message)) as e:
        _load(tmp_path, captions=caps)
    assert "Sentences/1000092795.txt:3" in str(e.value)


def test_xml_without_size(tmp_path):
    with pytest.raises(BadAnnotationError, match=r"Annotations/1000092795.xml: missing <size>"):
        _load(tmp_path, xml=XML.replace("<size><width>333</width><height>500</height><depth>3</depth></size>", ""))


def test_box_outside_image_errors_or_clips(tmp_path):
    xml = XML.replace("<xmax>333</xmax>", "<xmax>340</xmax>")
    with pytest.raises(BadAnnotationError, match=r"1000092795.xml: <object> #6: box \[249, 9, 340, 90\].*outside the 333x500 image"):
        _load(tmp_path, xml=xml)
    (record,) = _load(tmp_path, xml=xml, box_policy="clip")
    bushes = [a for a in record["annotations"] if a["chain_id"] == "4"][0]
    assert bushes["boxes"][1] == [249.0, 9.0, 333.0, 90.0]


def test_missing_root_and_missing_image(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_flickr30k_entities(str(tmp_path / "nowhere"), str(tmp_path), str(tmp_path / "train.txt"))
    with pytest.raises(FileNotFoundError, match=r"1 of 1 image files are missing, e.g. '.*1000092795.jpg'"):
        _load(tmp_path, write_image=False)


def test_missing_sentences_file_names_it(tmp_path):
    ann_root, image_root = write_flickr_root(str(tmp_path))
    os.remove(os.path.join(ann_root, "Sentences", "1000092795.txt"))
    with pytest.raises(FileNotFoundError, match=r"Sentences/1000092795.txt does not exist"):
        load_flickr30k_entities(ann_root, image_root, os.path.join(ann_root, "train.txt"))


def _with_bom(path):
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(b"\xef\xbb\xbf" + data)


def test_byte_order_marks_are_removed_from_sentences_split_lists_and_unrelated_captions(tmp_path):
    ann_root, image_root = write_flickr_root(str(tmp_path))
    unrelated = tmp_path / "UNRELATED_CAPTIONS"
    unrelated.write_text("1000092795 5\n")
    for path in (os.path.join(ann_root, "Sentences", "1000092795.txt"), os.path.join(ann_root, "train.txt"), str(unrelated)):
        _with_bom(path)
    (record,) = load_flickr30k_entities(ann_root, image_root, os.path.join(ann_root, "train.txt"),
                                        unrelated_captions_file=str(unrelated))
    assert record["image_id"] == "1000092795" and record["unrelated_captions"] == [4]
    first = [a for a in record["annotations"] if a["caption_index"] == 0][0]
    assert record["captions"][0].startswith("Two young guys") and first["first_word_index"] == 0


def test_a_byte_that_is_not_utf8_names_the_file_and_line(tmp_path):
    ann_root, image_root = write_flickr_root(str(tmp_path))
    path = os.path.join(ann_root, "Sentences", "1000092795.txt")
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    lines[2] = lines[2].replace(b"green", b"gr\xe9en")  # Latin-1, not UTF-8
    with open(path, "wb") as f:
        f.write(b"\n".join(lines))
    with pytest.raises(BadAnnotationError, match=r"Sentences/1000092795.txt:3:\d+: byte 0xe9 .* is not valid UTF-8"):
        load_flickr30k_entities(ann_root, image_root, os.path.join(ann_root, "train.txt"))
    (tmp_path / "split.txt").write_bytes(b"1000092795\n\xff\n")
    with pytest.raises(BadAnnotationError, match=r"split.txt:2:1: byte 0xff .* is not valid UTF-8"):
        load_flickr30k_entities(ann_root, image_root, str(tmp_path / "split.txt"))
