"""Every error message and count of the dataset readers, word for word (issue 14).

The readers' own tests check that bad input raises and that the message names the file; these
pin the whole message (file, line or record, key, the values quoted) and the logged counts, so a
wrong column, line number or label cannot pass unnoticed.
"""
import logging
import os
import xml.etree.ElementTree as ET

import pytest

from phrasedet.data.datasets import BadAnnotationError, load_flickr30k_entities, parse_annotation_xml, parse_sentence_line
from phrasedet.data.datasets.flickr30k_entities import parse_sentences_file, read_unrelated_captions

from .flickr_fixture import CAPTIONS, OBJECTS, XML, write_flickr_root


def _message(error, call, *args, **kwargs):
    with pytest.raises(error) as e:
        call(*args, **kwargs)
    return str(e.value)


# ----------------------------------------------------------------------------- Flickr30K Entities markup
@pytest.mark.parametrize("line, message", [
    ("Two guys] look .", "S.txt:3: ']' without '[' at column 9"),
    ("a [/EN#1/people guys] b] .", "S.txt:3: ']' without '[' at column 24"),  # after a closed phrase
    ("x [EN#1 people Two guys] look at the sky today",
     "S.txt:3: malformed phrase tag at column 3: '[EN#1 people Two guys] look at' (expected '[/EN#<chain id>/<type> words]')"),
    ("a [/EN#1/people Two guys look", "S.txt:3: '[' at column 3 is never closed"),
    ("a [/EN#1/people Two [/EN#2/other guys] ] look .", "S.txt:3: nested '[' inside the phrase at column 3"),
    ("a b [/EN#1/people ] look .", "S.txt:3: empty phrase at column 5"),
    ("x] [/EN#1/people y] z", "S.txt:3: ']' without '[' at column 2"),  # a later ']' closes a phrase
])
def test_markup_errors_name_the_place_and_the_column(line, message):
    assert _message(BadAnnotationError, parse_sentence_line, line, "S.txt:3") == message


def test_markup_error_without_a_place_says_string():
    assert _message(BadAnnotationError, parse_sentence_line, "a]") == "<string>: ']' without '[' at column 2"


def test_phrase_words_are_joined_by_single_spaces_and_counted_from_zero():
    caption, (p, q) = parse_sentence_line("  see [/EN#12/people/other  two   men ] and [/EN#3/dogs a dog]  ")
    assert caption == "see two men and a dog"
    assert (p.phrase, p.chain_id, p.types, p.first_word_index) == ("two men", "12", ["people", "other"], 1)
    assert (q.phrase, q.chain_id, q.types, q.first_word_index) == ("a dog", "3", ["dogs"], 4)


def test_text_right_after_a_phrase_is_kept():
    assert parse_sentence_line("[/EN#1/people two men]'s car")[0] == "two men 's car"


def test_missing_sentences_file_is_named(tmp_path):
    missing = str(tmp_path / "1.txt")
    assert _message(FileNotFoundError, parse_sentences_file, missing) == f"Sentences file {missing!r} does not exist"


def test_sentences_file_skips_blank_lines_but_counts_them(tmp_path):
    path = tmp_path / "1.txt"
    path.write_text("[/EN#1/people A man] runs .\n\n   \n[/EN#2/people ] x\n")
    assert _message(BadAnnotationError, parse_sentences_file, str(path)) == f"{path}:4: empty phrase at column 1"
    path.write_text("[/EN#1/people A man] runs .\n\nA dog .\n")
    assert [c for c, _ in parse_sentences_file(str(path))] == ["A man runs .", "A dog ."]


# ----------------------------------------------------------------------------- Flickr30K Entities XML
def _xml(tmp_path, objects=OBJECTS, size="<size><width>333</width><height>500</height></size>"):
    path = tmp_path / "a.xml"
    path.write_text(f"<annotation>{size}{objects}</annotation>")
    return str(path)


@pytest.mark.parametrize("size, message", [
    ("", "missing <size> (needed for the image width and height)"),
    ("<size><height>500</height></size>", "missing <width>"),
    ("<size><width>333</width><height></height></size>", "missing <height>"),
    ("<size><width>333</width><height>tall</height></size>", "<height> is not a number: 'tall'"),
])
def test_size_errors_name_the_file_and_the_tag(tmp_path, size, message):
    path = _xml(tmp_path, size=size)
    assert _message(BadAnnotationError, parse_annotation_xml, path) == f"{path}: {message}"


def test_sizes_may_be_written_as_decimals_with_spaces(tmp_path):
    ann = parse_annotation_xml(_xml(tmp_path, "", "<size><width> 333.0 </width><height>5e2</height></size>"))
    assert (ann.width, ann.height) == (333, 500)


@pytest.mark.parametrize("obj, message", [
    ("<object><name> </name><bndbox/></object>", "<object> #2: no <name> (chain id)"),
    ("<object><name>4</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>9</xmax></bndbox></object>",
     "<object> #2: missing <ymax>"),
    ("<object><name>4</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>9</xmax><ymax>x</ymax></bndbox></object>",
     "<object> #2: <ymax> is not a number: 'x'"),
    ("<object><name>4</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>334</xmax><ymax>9</ymax></bndbox></object>",
     "<object> #2: box [0, 0, 334, 9] (0-based xyxy) lies outside the 333x500 image (use box_policy='clip' to clip such boxes)"),
    ("<object><name>4</name><bndbox><xmin>5</xmin><ymin>1</ymin><xmax>4</xmax><ymax>9</ymax></bndbox></object>",
     "<object> #2: empty box [4, 0, 4, 9]"),
])
def test_object_errors_name_the_file_and_the_object_number(tmp_path, obj, message):
    first = "<object><name>1</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>9</xmax><ymax>9</ymax></bndbox></object>"
    path = _xml(tmp_path, first + obj)
    assert _message(BadAnnotationError, parse_annotation_xml, path) == f"{path}: {message}"


def test_xml_that_does_not_parse_names_the_file_and_the_parser_error(tmp_path):
    path = tmp_path / "a.xml"
    path.write_text("<annotation><size>")
    with pytest.raises(ET.ParseError) as parser:
        ET.parse(str(path))
    assert _message(BadAnnotationError, parse_annotation_xml, str(path)) == f"{path}: cannot parse XML: {parser.value}"
    assert _message(BadAnnotationError, parse_annotation_xml, str(tmp_path)).startswith(
        f"{tmp_path}: cannot parse XML: [Errno 21] Is a directory")


def test_box_at_the_image_edge_is_inside_and_one_pixel_beyond_is_clipped(tmp_path):
    # 1-based inclusive pixels 1..333 of a 333-wide image: [0, 333) is inside, 334 sticks out
    objs = ("<object><name>1</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>333</xmax><ymax>500</ymax></bndbox></object>"
            "<object><name>2</name><name>3</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>334</xmax><ymax>501</ymax></bndbox></object>")
    ann = parse_annotation_xml(_xml(tmp_path, objs), box_policy="clip")
    assert ann.boxes == {"1": [[0.0, 0.0, 333.0, 500.0]], "2": [[0.0, 0.0, 333.0, 500.0]], "3": [[0.0, 0.0, 333.0, 500.0]]}
    assert ann.clipped_boxes == 1


def test_scene_and_nobndbox_flags_are_exactly_one(tmp_path):
    objs = ("<object><name>1</name><scene> 1 </scene><nobndbox>0</nobndbox></object>"
            "<object><name>2</name><scene>0</scene><nobndbox> 1</nobndbox></object>"
            "<object><name>3</name><scene>2</scene><nobndbox>10</nobndbox></object>"
            "<object><name>4</name></object>")
    ann = parse_annotation_xml(_xml(tmp_path, objs))
    assert (ann.scene, ann.nobox, ann.boxes, ann.clipped_boxes) == ({"1"}, {"2"}, {}, 0)


# ----------------------------------------------------------------------------- UNRELATED_CAPTIONS
@pytest.mark.parametrize("line", ["1000092795", "1000092795 x", "1000092795 0", "1000092795 1 2", "1000092795 -1"])
def test_unrelated_caption_line_errors_quote_the_line(tmp_path, line):
    path = tmp_path / "UNRELATED_CAPTIONS"
    path.write_text(f"# <image id> <sentence number>\n\n12 1\n{line}\n")
    assert (_message(BadAnnotationError, read_unrelated_captions, str(path))
            == f"{path}:4: expected '<image id> <sentence number>', got {line!r}")


def test_unrelated_captions_are_zero_based_sets_per_image(tmp_path):
    path = tmp_path / "UNRELATED_CAPTIONS"
    path.write_text("12 1\n12 5\n  7 2  \n12 1\n")
    assert read_unrelated_captions(str(path)) == {"12": {0, 4}, "7": {1}}


# ----------------------------------------------------------------------------- Flickr30K Entities loader
def _load(root, **kwargs):
    return load_flickr30k_entities(root, os.path.join(os.path.dirname(root), "flickr30k-images"),
                                   os.path.join(root, "train.txt"), **kwargs)


@pytest.mark.parametrize("folder, name", [("Sentences", "1000092795.txt"), ("Annotations", "1000092795.xml")])
def test_missing_annotation_file_names_the_image_and_the_path(tmp_path, folder, name):
    root, _ = write_flickr_root(str(tmp_path))
    path = os.path.join(root, folder, name)
    os.remove(path)
    assert (_message(FileNotFoundError, _load, root)
            == f"Flickr30K Entities: image 1000092795 is in the split list but {path} does not exist")


def test_missing_root_and_images_are_named(tmp_path):
    assert (_message(FileNotFoundError, _load, str(tmp_path / "nowhere"))
            == f"Flickr30K Entities root {str(tmp_path / 'nowhere')!r} does not exist")
    root, image_root = write_flickr_root(str(tmp_path), write_image=False)
    assert (_message(FileNotFoundError, _load, root)
            == f"Flickr30K Entities: 1 of 1 image files are missing, e.g. {os.path.join(image_root, '1000092795.jpg')!r}")
    assert len(_load(root, check_images=False)) == 1


@pytest.mark.parametrize("numbers, ok", [("5", True), ("6", False), ("7\n1000092795 6", False)])
def test_unrelated_caption_beyond_the_last_caption_is_an_error(tmp_path, numbers, ok):
    root, _ = write_flickr_root(str(tmp_path))
    unrelated = tmp_path / "UNRELATED_CAPTIONS"
    unrelated.write_text(f"1000092795 {numbers}\n")
    if ok:
        assert _load(root, unrelated_captions_file=str(unrelated))[0]["unrelated_captions"] == [4]
        return
    sentences = os.path.join(root, "Sentences", "1000092795.txt")
    assert (_message(BadAnnotationError, _load, root, unrelated_captions_file=str(unrelated))
            == f"UNRELATED_CAPTIONS: image 1000092795 sentence 6 but {sentences} has 5 captions")


def test_record_and_entries_in_full(tmp_path):
    caps = ["[/EN#1/people Two young guys] see [/EN#0/notvisual it] near [/EN#99/other a dog] .",
            "[/EN#4/scene/notvisual many bushes] and [/EN#10/other time] and [/EN#8/scene the yard] ."]
    root, image_root = write_flickr_root(str(tmp_path), captions=caps)
    (record,) = _load(root)
    union = [20.0, 100.0, 219.0, 400.0]
    assert {k: v for k, v in record.items() if k not in ("annotations", "unboxed_phrases")} == {
        "file_name": os.path.join(image_root, "1000092795.jpg"), "image_id": "1000092795", "height": 500,
        "width": 333, "dataset": "flickr30k_entities", "captions": [
            "Two young guys see it near a dog .", "many bushes and time and the yard ."],
        "unrelated_captions": []}
    assert record["annotations"] == [{
        "phrase": "two young guys", "phrase_raw": "Two young guys", "phrase_types": ["people"], "chain_id": "1",
        "caption_index": 0, "first_word_index": 0, "bbox": union, "bbox_mode": 0, "category_id": 0,
        "boxes": [[158.0, 124.0, 219.0, 335.0], [20.0, 100.0, 120.0, 400.0]]}]
    # chain 0 and the notvisual type win over boxes (chain 4 has two); scene before nobndbox
    assert [(u["chain_id"], u["reason"], u["caption_index"], u["first_word_index"]) for u in record["unboxed_phrases"]] == [
        ("0", "notvisual", 0, 4), ("99", "unannotated", 0, 6), ("4", "notvisual", 1, 0), ("10", "nobox", 1, 3),
        ("8", "scene", 1, 5)]
    assert record["unboxed_phrases"][1] == {"phrase": "dog", "phrase_raw": "a dog", "phrase_types": ["other"],
                                            "chain_id": "99", "caption_index": 0, "first_word_index": 6,
                                            "reason": "unannotated"}


def test_a_chain_both_scene_and_nobndbox_is_scene(tmp_path):
    xml = XML.replace("<name>10</name><nobndbox>1</nobndbox><scene>0</scene>", "<name>10</name><nobndbox>1</nobndbox><scene>1</scene>")
    root, _ = write_flickr_root(str(tmp_path), xml=xml)
    (record,) = _load(root)
    assert [(u["chain_id"], u["reason"]) for u in record["unboxed_phrases"] if u["chain_id"] == "10"] == [("10", "scene")]


def test_load_logs_every_count(tmp_path, caplog):
    caps = list(CAPTIONS[:4]) + ["[/EN#0/notvisual It] shows [/EN#99/other a dog] and [/EN#1/people men] ."]
    xml = XML.replace("<xmax>333</xmax>", "<xmax>340</xmax>")  # chain 4's second box, clipped
    root, _ = write_flickr_root(str(tmp_path), captions=caps, xml=xml)
    unrelated = tmp_path / "UNRELATED_CAPTIONS"
    unrelated.write_text("1000092795 4\n")
    with caplog.at_level(logging.INFO, logger="phrasedet.data.datasets.flickr30k_entities"):
        _load(root, unrelated_captions_file=str(unrelated), box_policy="clip")
    # box targets 3 + 2 + 2 in captions 1-3, 1 in caption 5; caption 4 (3 phrases) skipped; the two
    # yards scene-only; caption 5's "It" notvisual, "a dog" unannotated
    assert caplog.messages[-1] == (
        f"Loaded 1 images of {os.path.join(root, 'train.txt')}: 8 box-target phrase occurrences; not box targets: "
        "1 notvisual, 2 scene-only, 0 nobndbox, 1 chain not in the XML; 3 phrases of unrelated captions skipped; "
        "1 boxes clipped to the image.")


# ----------------------------------------------------------------------------- ReferIt
def _referit_root(tmp_path, refs, instances=None):
    from .test_referit import _write_refclef

    return _write_refclef(str(tmp_path), refs=refs, instances=instances)


def _ref(ref_id=9, ann_id=1, image_id=25123, split="train", sentences=({"raw": "x"},), **extra):
    return {"ref_id": ref_id, "ann_id": ann_id, "image_id": image_id, "split": split, "sentences": list(sentences),
            **extra}


def _referit(tmp_path, refs, instances=None, **kwargs):
    from phrasedet.data.datasets import load_referit

    refclef, image_root = _referit_root(tmp_path, refs, instances)
    return load_referit(refclef, image_root, **{"split": "train", **kwargs}), refclef, image_root


def _referit_error(tmp_path, refs, instances=None, error=BadAnnotationError, **kwargs):
    with pytest.raises(error) as e:
        _referit(tmp_path, refs, instances, **kwargs)
    refclef = os.path.join(str(tmp_path), "refclef")
    return str(e.value), os.path.join(refclef, "refs(berkeley).p"), os.path.join(refclef, "instances.json")


@pytest.mark.parametrize("refs, message", [
    ({"ref_id": 9}, "expected a list of refs, got dict"),
    ([_ref(), "ref"], "record 1: expected a JSON object, got str 'ref'"),
    ([_ref(ref_id="r9", image_id="25123")], "record 0 ('r9'): key 'image_id' must be an integer, got '25123'"),
    ([_ref(split=None)], "record 0 (ref_id 9): key 'split' must be a string, got None"),
    ([{**_ref(), "sentences": "x"}], "record 0 (ref_id 9): key 'sentences' must be a list, got 'x'"),
    ([_ref(sentences=[{"raw": "a"}, "b"])], "record 0 (ref_id 9): sentences[1]: expected a JSON object, got str 'b'"),
    ([_ref(sentences=[{"tokens": []}])], "record 0 (ref_id 9): sentences[0]: missing key 'raw' (or 'sent')"),
    ([_ref(sentences=[{"sent": 3}])], "record 0 (ref_id 9): sentences[0]: key 'sent' must be a string, got 3"),
    ([_ref(sentences=[{"raw": "a", "sent": None}])], "record 0 (ref_id 9): sentences[0]: key 'sent' must be a string, got None"),
])
def test_refs_errors_name_the_file_the_ref_the_sentence_and_the_key(tmp_path, refs, message):
    got, refs_path, _ = _referit_error(tmp_path, refs)
    expected = f"{refs_path}: {message}".replace("record 0 ('r9')", "record 0 (ref_id 'r9')")
    assert got == expected


def test_refs_and_annotations_not_in_instances_are_named(tmp_path):
    got, refs_path, inst_path = _referit_error(tmp_path, [_ref(ann_id=5)])
    assert got == f"{refs_path}: ref_id 9: ann_id 5 is not in {inst_path}"
    got, refs_path, inst_path = _referit_error(tmp_path, [_ref(image_id=4)])
    assert got == f"{refs_path}: image_id 4 is not in {inst_path}"


def test_referit_box_error_names_the_annotation_and_the_ref(tmp_path):
    instances = {"images": [{"id": 25123, "file_name": "25123.jpg", "width": 100, "height": 80}],
                 "annotations": [{"id": 1, "bbox": [80, 20, 20.5, 40]}]}
    got, _, inst_path = _referit_error(tmp_path, [_ref()], instances)
    assert got == (f"{inst_path}: annotation id 1 (ref_id 9): box [80, 20, 100.5, 60] (0-based xyxy) lies outside "
                   "the 100x80 image (use box_policy='clip' to clip such boxes)")


def test_unknown_referit_split_lists_the_known_ones(tmp_path):
    with pytest.raises(KeyError) as e:
        _referit(tmp_path, [_ref()], split="dev")
    assert e.value.args[0] == "ReferIt split 'dev' unknown; choose from ['test', 'testA', 'testB', 'train', 'trainval', 'val']"


@pytest.mark.parametrize("split, images", [
    ("train", ["1"]), ("val", ["2"]), ("trainval", ["1", "2"]), ("test", ["3"]), ("testA", ["4"]), ("testB", ["5"]),
])
def test_each_referit_split_takes_the_refs_of_its_split_values(tmp_path, split, images):
    names = ["train", "val", "test", "testA", "testB"]
    refs = [_ref(ref_id=n, ann_id=n, image_id=n, split=s) for n, s in enumerate(names, 1)]
    instances = {"images": [{"id": n, "file_name": f"{n}.jpg", "width": 100, "height": 80} for n in range(1, 6)],
                 "annotations": [{"id": n, "bbox": [0, 0, 10, 10]} for n in range(1, 6)]}
    records, _, _ = _referit(tmp_path, refs, instances, split=split, check_images=False)
    assert [r["image_id"] for r in records] == images


def test_referit_record_and_entries_in_full(tmp_path):
    refs = [_ref(ref_id=7, ann_id="a1", sentences=[{"raw": "", "sent": "Man"}, {"sent_id": 71, "raw": "The Guy"}])]
    instances = {"images": [{"id": 25123, "file_name": "25123.jpg", "width": 100, "height": 80}],
                 "annotations": [{"id": "a1", "bbox": [10.5, 20, 30, 40]}]}
    (record,), _, image_root = _referit(tmp_path, refs, instances)
    box = [10.5, 20.0, 40.5, 60.0]
    common = {"bbox": box, "bbox_mode": 0, "category_id": 0, "boxes": [box], "phrase_types": [], "chain_id": "a1",
              "ref_id": 7, "ann_id": "a1", "first_word_index": 0}
    assert record == {
        "file_name": os.path.join(image_root, "25", "images", "25123.jpg"), "image_id": "25123", "height": 80,
        "width": 100, "dataset": "referit", "captions": ["Man", "The Guy"], "unrelated_captions": [],
        "unboxed_phrases": [],
        "annotations": [{**common, "phrase": "man", "phrase_raw": "Man", "sent_id": 0, "caption_index": 0},
                        {**common, "phrase": "guy", "phrase_raw": "The Guy", "sent_id": 71, "caption_index": 1}]}


def test_referit_image_is_found_directly_before_scanning_and_named_when_missing(tmp_path):
    refclef, image_root = _referit_root(tmp_path, [_ref()])
    from phrasedet.data.datasets import load_referit

    direct = os.path.join(image_root, "25123.jpg")
    with open(direct, "wb") as f:  # a second copy at the top: the direct path wins over the scan
        f.write(open(os.path.join(image_root, "25", "images", "25123.jpg"), "rb").read())
    assert load_referit(refclef, image_root, "train")[0]["file_name"] == direct
    os.remove(direct)
    os.remove(os.path.join(image_root, "25", "images", "25123.jpg"))
    with pytest.raises(FileNotFoundError) as e:
        load_referit(refclef, image_root, "train")
    assert str(e.value) == f"ReferIt: 1 of 1 image files are missing, e.g. {direct!r}"


def test_referit_logs_every_count(tmp_path, caplog):
    refs = [_ref(sentences=[{"raw": " "}, {"raw": "man"}, {"sent": ""}]), _ref(ref_id=10, ann_id=2, image_id=25124)]
    instances = {"images": [{"id": 25123, "file_name": "25123.jpg", "width": 100, "height": 80},
                            {"id": 25124, "file_name": "25124.jpg", "width": 60, "height": 40}],
                 "annotations": [{"id": 1, "bbox": [0, 0, 10, 10]}, {"id": 2, "bbox": [50, 30, 20, 20]}]}
    imlist = tmp_path / "list.txt"
    imlist.write_text("25124\n99\n25123\n98\n")
    with caplog.at_level(logging.INFO, logger="phrasedet.data.datasets.referit"):
        records, _, _ = _referit(tmp_path, refs, instances, image_list=str(imlist), box_policy="clip")
        _referit(tmp_path, refs, instances, split="train", box_policy="clip")
    assert [r["image_id"] for r in records] == ["25124", "25123"]  # the list's order
    assert caplog.messages[-2:] == [
        f"Loaded 2 ReferIt images (berkeley, split train, image list {imlist}): 2 phrase instances; skipped 2 empty "
        "sentences, 2 listed images absent from instances.json; 1 boxes clipped.",
        "Loaded 2 ReferIt images (berkeley, split train): 2 phrase instances; skipped 2 empty sentences, "
        "0 listed images absent from instances.json; 1 boxes clipped."]


# ----------------------------------------------------------------------------- Flickr30K captions
def test_flickr_captions_log_the_unrelated_captions_of_every_image(tmp_path, caplog):
    from phrasedet.data.datasets import load_flickr30k_entities_captions

    root, image_root = write_flickr_root(str(tmp_path), write_image=False)
    write_flickr_root(str(tmp_path), image_id="36979", write_image=False)
    split = tmp_path / "split.txt"
    split.write_text("1000092795\n36979\n")
    unrelated = tmp_path / "UNRELATED_CAPTIONS"
    unrelated.write_text("1000092795 5\n36979 1\n36979 2\n")
    with caplog.at_level(logging.INFO, logger="phrasedet.data.datasets.flickr30k_captions"):
        load_flickr30k_entities_captions(root, image_root, str(split), str(unrelated))
    assert caplog.messages[-1] == f"Loaded 2 images of {split}: 10 captions; 3 captions listed in UNRELATED_CAPTIONS kept."


def test_token_file_caption_may_hold_a_tab_made_a_space_and_blank_lines_in_between_are_skipped(tmp_path, caplog):
    from phrasedet.data.datasets import load_flickr30k_token_captions

    path = tmp_path / "results.token"
    path.write_text("1.jpg#1\tA dog\tjumps .\n\n1.jpg#0\tA cat .\n2.jpg#0\tA bird .\n")
    with caplog.at_level(logging.INFO, logger="phrasedet.data.datasets.flickr30k_captions"):
        records = load_flickr30k_token_captions(str(path), "/im")
    assert [(r["image_id"], r["captions"], r["caption_ids"]) for r in records] == [
        ("1", ["A cat .", "A dog jumps ."], ["1.jpg#0", "1.jpg#1"]), ("2", ["A bird ."], ["2.jpg#0"])]
    assert caplog.messages[-1] == (f"Loaded 2 images of {path} (split list None): 3 captions; "
                                   "0 images of the token file not in the split.")
    missing = str(tmp_path / "nothing.token")
    assert _message(FileNotFoundError, load_flickr30k_token_captions, missing, "/im") == (
        f"Flickr30K token file {missing!r} does not exist")


def test_flickr_karpathy_logs_the_file_the_split_and_its_counts(tmp_path, caplog):
    from phrasedet.data.datasets import load_flickr30k_karpathy

    from . import caption_fixtures as fx

    path = fx.write_json(str(tmp_path / "dataset_flickr30k.json"), fx.karpathy_flickr())
    with caplog.at_level(logging.INFO, logger="phrasedet.data.datasets"):
        load_flickr30k_karpathy(path, "/f30k", "test")
    assert caplog.messages[-2:] == [
        f"{path}: split test takes 1 of 3 images (1 train, 1 val, 1 test, 0 restval).",
        "Loaded 1 Flickr30K images (Karpathy split test): 5 captions."]


# ----------------------------------------------------------------------------- COCO captions
def _coco_file(tmp_path, data, name="captions.json"):
    import json

    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("data, message", [
    ({"images": {}, "annotations": []}, "key 'images' must be a list, got {}"),
    ({"images": [{"id": 1, "height": 2, "width": 3}, {"id": 5, "height": 0, "width": 3}], "annotations": []},
     "images[1] (id 5): key 'height' must be a positive number, got 0"),
    ({"images": [], "annotations": [{"image_id": 1, "id": 7, "caption": " \t "}]},
     "annotations[0] (id 7): key 'caption': empty caption"),
    ({"images": [], "annotations": [{"image_id": 1, "id": 7, "caption": "a"}, {"id": 8, "caption": "b"}]},
     "annotations[1] (id 8): missing key 'image_id'"),
])
def test_coco_caption_file_errors_name_the_file_the_record_and_the_key(tmp_path, data, message):
    from phrasedet.data.datasets import read_coco_captions

    path = _coco_file(tmp_path, data)
    assert _message(BadAnnotationError, read_coco_captions, [path]) == f"{path}: {message}"
    missing = str(tmp_path / "none.json")
    assert _message(FileNotFoundError, read_coco_captions, [missing]) == f"COCO captions file {missing!r} does not exist"


def test_coco_karpathy_image_without_official_captions_names_both_files(tmp_path):
    from phrasedet.data.datasets import load_coco_karpathy

    from . import caption_fixtures as fx

    _, karpathy, (train_file, val_file) = fx.write_coco_root(str(tmp_path))
    data = fx.official_coco("val2014")
    data["images"] = data["images"][1:]
    fx.write_json(val_file, data)
    where = f"{karpathy}: images[0]: cocoid 391895"
    assert (_message(BadAnnotationError, load_coco_karpathy, karpathy, "/coco", "test", captions_files=(train_file, val_file))
            == f"{where} is not in the 'images' of {train_file}, {val_file}")
    data = fx.official_coco("val2014")
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] != 391895]
    fx.write_json(val_file, data)
    assert (_message(BadAnnotationError, load_coco_karpathy, karpathy, "/coco", "test", captions_files=(train_file, val_file))
            == f"{where} has no caption in {train_file}, {val_file}")


# ----------------------------------------------------------------------------- VSE++ precomputed features
def test_precomp_features_must_have_rows_and_may_be_one_dimensional(tmp_path):
    import numpy as np

    from phrasedet.data.datasets import load_vsepp_precomp

    from . import caption_fixtures as fx

    _, ims = fx.write_precomp(str(tmp_path), captions=fx.FLICKR_1000092795)
    np.save(ims, np.float32(3.0))
    assert _message(BadAnnotationError, load_vsepp_precomp, str(tmp_path), "test") == (
        f"{ims}: expected an array with a row per image or per caption, got shape ()")
    with open(ims, "wb") as f:  # an .npz archive under the .npy name
        np.savez(f, x=np.zeros(2))
    assert _message(BadAnnotationError, load_vsepp_precomp, str(tmp_path), "test") == (
        f"{ims}: expected an array with a row per image or per caption, got a .npz archive")
    np.save(ims, np.zeros(5, np.float32))  # one value per caption: 5 rows
    (record,) = load_vsepp_precomp(str(tmp_path), "test")
    assert (record["feature_file"], record["feature_row"]) == (ims, 0)
    os.remove(ims)
    assert _message(FileNotFoundError, load_vsepp_precomp, str(tmp_path), "test") == (
        f"VSE++ image features file {ims!r} does not exist")


# ----------------------------------------------------------------------------- Karpathy split files
@pytest.mark.parametrize("coco, change, message", [
    (False, lambda ims: ims[2].update(split="dev"), "images[2]: unknown split 'dev' (expected one of train, val, test, restval)"),
    (False, lambda ims: ims[1].update(sentences={}), "images[1]: key 'sentences' must be a list, got {}"),
    (False, lambda ims: ims[0].update(filename=7), "images[0]: key 'filename' must be a string, got 7"),
    (False, lambda ims: ims[1]["sentences"][3].update(raw=None), "images[1].sentences[3]: key 'raw' must be a string, got None"),
    (False, lambda ims: ims[1]["sentences"][2].update(sentid=2.5),
     "images[1].sentences[2]: key 'sentid' must be an integer or a string, got 2.5"),
    (False, lambda ims: ims[0]["sentences"][4].update(raw="\t"), "images[0].sentences[4].raw: empty caption"),
    (True, lambda ims: ims[1].update(filepath=None), "images[1]: key 'filepath' must be a string, got None"),
    (True, lambda ims: ims[3].update(cocoid="391895"), "images[3]: key 'cocoid' must be an integer, got '391895'"),
])
def test_karpathy_errors_name_the_file_the_image_the_sentence_and_the_key(tmp_path, coco, change, message):
    from phrasedet.data.datasets import read_karpathy_split

    from . import caption_fixtures as fx

    data = fx.karpathy_coco() if coco else fx.karpathy_flickr()
    change(data["images"])
    path = fx.write_json(str(tmp_path / "split.json"), data)
    assert _message(BadAnnotationError, read_karpathy_split, path, coco) == f"{path}: {message}"


def test_karpathy_file_and_split_errors_in_full(tmp_path):
    from phrasedet.data.datasets import read_karpathy_split, select_karpathy_split

    missing = str(tmp_path / "none.json")
    assert _message(FileNotFoundError, read_karpathy_split, missing) == f"Karpathy split file {missing!r} does not exist"
    with pytest.raises(KeyError) as e:
        select_karpathy_split([], "restval", "split.json")
    assert e.value.args[0] == "Karpathy split 'restval' unknown; choose from ['train', 'val', 'test']"


def test_karpathy_sentence_ids_become_strings_and_images_keep_their_index(tmp_path):
    from phrasedet.data.datasets import read_karpathy_split

    from . import caption_fixtures as fx

    data = fx.karpathy_coco()
    data["images"][1]["sentences"][0]["sentid"] = "s-1"
    images = read_karpathy_split(fx.write_json(str(tmp_path / "split.json"), data), coco=True)
    assert [im.index for im in images] == [0, 1, 2, 3]
    assert images[1].caption_ids[0] == "s-1" and images[1].cocoid == data["images"][1]["cocoid"]
    assert images[1].filepath == data["images"][1]["filepath"]
    plain = read_karpathy_split(fx.write_json(str(tmp_path / "plain.json"), data))  # not read as COCO
    assert (plain[1].filepath, plain[1].cocoid) == ("", None)


def test_coco_karpathy_log_sums_the_captions_left_out_over_images(tmp_path, caplog):
    from phrasedet.data.datasets import load_coco_karpathy

    from . import caption_fixtures as fx

    data = fx.karpathy_coco()
    train = next(im for im in data["images"] if im["split"] == "train")
    train["sentences"] += [{"raw": f"extra {n}", "sentid": 900 + n} for n in range(2)]  # 7 captions
    path = fx.write_json(str(tmp_path / "dataset_coco.json"), data)
    with caplog.at_level(logging.INFO, logger="phrasedet.data.datasets"):
        records = load_coco_karpathy(path, "/coco", "train")
    assert [len(r["captions"]) for r in records] == [5, 5]
    assert caplog.messages[-2:] == [  # restval 522418 has 6 captions: 1 + 2 left out
        f"{path}: split train takes 2 of 4 images (1 train, 1 val, 1 test, 1 restval) with restval.",
        f"Loaded 2 COCO images (Karpathy split train, captions from {path}): 10 captions; 3 captions beyond "
        "max_captions=5 left out (from 2 images)."]


def test_missing_unrelated_captions_file_is_named(tmp_path):
    missing = str(tmp_path / "UNRELATED_CAPTIONS")
    assert _message(FileNotFoundError, read_unrelated_captions, missing) == f"UNRELATED_CAPTIONS file {missing!r} does not exist"


def test_restval_joins_train_only_when_asked(tmp_path):
    from phrasedet.data.datasets import load_flickr30k_karpathy, read_karpathy_split, select_karpathy_split

    from . import caption_fixtures as fx

    data = fx.karpathy_flickr()
    data["images"][1]["split"] = "restval"  # 1001773457, a val image in the fixture
    path = fx.write_json(str(tmp_path / "dataset_flickr30k.json"), data)
    images = read_karpathy_split(path)
    assert [im.split for im in select_karpathy_split(images, "train", path)] == ["train"]  # the default: no restval
    assert [im.split for im in select_karpathy_split(images, "train", path, True)] == ["train", "restval"]
    assert [r["image_id"] for r in load_flickr30k_karpathy(path, "/f30k", "train")] == ["1000092795"]


# ----------------------------------------------------------------------------- Visual Genome
@pytest.mark.parametrize("data, message", [
    ({"annotations": []}, "missing key 'images'"),
    ({"images": [{"id": 1}, {"id": "7"}]}, "images[1] (id '7'): key 'id' must be an integer, got '7'"),
    ({"images": [{"id": 1}, {"file_name": "x.jpg"}]}, "images[1]: missing key 'id'"),
])
def test_coco_image_id_errors_name_the_file_the_record_and_the_key(tmp_path, data, message):
    from phrasedet.data.datasets import read_coco_image_ids

    path = _coco_file(tmp_path, data)
    assert _message(BadAnnotationError, read_coco_image_ids, path) == f"{path}: {message}"
    missing = str(tmp_path / "none.json")
    assert _message(FileNotFoundError, read_coco_image_ids, missing) == f"COCO annotation file {missing!r} does not exist"
    assert read_coco_image_ids(_coco_file(tmp_path, {"images": [{"id": 3}, {"id": 1}, {"id": 3}]}, "ok.json")) == {1, 3}


def test_visual_genome_logs_the_images_absent_from_the_karpathy_file(tmp_path, caplog):
    import json

    from phrasedet.data.datasets import load_visual_genome_pointing

    from .test_visual_genome import write_vg_root

    paths = write_vg_root(str(tmp_path))
    with open(paths[4]) as f:
        karpathy = json.load(f)
    karpathy["images"] = [im for im in karpathy["images"] if im["cocoid"] not in (100, 500)]  # images 1 and 5
    with open(paths[4], "w") as f:
        json.dump(karpathy, f)
    with caplog.at_level(logging.INFO, logger="phrasedet.data.datasets.visual_genome"):
        records = load_visual_genome_pointing(*paths)
    assert [r["image_id"] for r in records] == ["5", "1"]  # kept; image 4 (restval) left out
    assert (f"1 whose cocoid is in Karpathy split(s) train, restval of {paths[4]} (2 images absent from that file "
            "kept)") in caplog.messages[-1]


def _py2_pickle(refs):
    """``refs`` pickled as Python 2 writes it (protocol 2, str as byte strings): what REFER's
    ``refs(<split_by>).p`` holds. Strings are given as bytes (Latin-1 in the release)."""
    import struct

    def dump(x):
        if isinstance(x, bytes):
            return b"U" + bytes([len(x)]) + x  # SHORT_BINSTRING: a Python 2 str
        if isinstance(x, int):
            return b"J" + struct.pack("<i", x)
        if isinstance(x, list):
            return b"](" + b"".join(dump(v) for v in x) + b"e"
        return b"}(" + b"".join(dump(k) + dump(v) for k, v in x.items()) + b"u"

    return b"\x80\x02" + dump(refs) + b"."


def test_referit_refs_written_by_python2_are_read_as_latin1(tmp_path):
    refclef, image_root = _referit_root(tmp_path, [_ref()])
    refs = [{b"ref_id": 9, b"ann_id": 1, b"image_id": 25123, b"split": b"train",
             b"sentences": [{b"raw": b"caf\xe9 man", b"sent_id": 5}]}]
    with open(os.path.join(refclef, "refs(berkeley).p"), "wb") as f:
        f.write(_py2_pickle(refs))
    from phrasedet.data.datasets import load_referit

    (record,) = load_referit(refclef, image_root)  # split "train" by default
    assert [(a["phrase_raw"], a["sent_id"]) for a in record["annotations"]] == [("café man", 5)]


def test_referit_missing_files_are_named(tmp_path):
    from phrasedet.data.datasets import load_referit

    refclef, image_root = _referit_root(tmp_path, [_ref()])
    instances = os.path.join(refclef, "instances.json")
    os.remove(instances)
    assert _message(FileNotFoundError, load_referit, refclef, image_root) == (
        f"ReferIt instances file {instances!r} does not exist")
    refs = os.path.join(refclef, "refs(unc).p")
    assert _message(FileNotFoundError, load_referit, refclef, image_root, split_by="unc") == (
        f"ReferIt refs file {refs!r} does not exist")


def test_flickr_chain_0_is_notvisual_whatever_its_type_and_clipped_boxes_add_up_over_images(tmp_path, caplog):
    caps = ["[/EN#0/people Someone] holds [/EN#4/scene many bushes] ."]
    xml = XML.replace("<xmax>333</xmax>", "<xmax>340</xmax>")  # chain 4's second box, clipped
    root, image_root = write_flickr_root(str(tmp_path), captions=caps, xml=xml, write_image=False)
    write_flickr_root(str(tmp_path), captions=caps, xml=xml, image_id="36979", write_image=False)
    split = tmp_path / "split.txt"
    split.write_text("1000092795\n36979\n")
    with caplog.at_level(logging.INFO, logger="phrasedet.data.datasets.flickr30k_entities"):
        records = load_flickr30k_entities(root, image_root, str(split), box_policy="clip", check_images=False)
    assert [(u["chain_id"], u["reason"]) for u in records[0]["unboxed_phrases"]] == [("0", "notvisual")]
    assert caplog.messages[-1].endswith("0 phrases of unrelated captions skipped; 2 boxes clipped to the image.")


def _vg(tmp_path, regions=None, images=None, **kwargs):
    from phrasedet.data.datasets import load_visual_genome_pointing

    from .test_visual_genome import write_vg_root

    paths = write_vg_root(str(tmp_path), regions, images)
    return load_visual_genome_pointing(*paths[:4], check_images=False, **kwargs), paths


def _vg_images(edit):
    from .test_visual_genome import image_data

    images = image_data()
    edit(images)
    return images


@pytest.mark.parametrize("edit, message", [
    (lambda ims: ims[0].update(url="http://[bad/VG_100K/1.jpg"), "[0]: key 'url' 'http://[bad/VG_100K/1.jpg' is not a URL: Invalid IPv6 URL"),
    (lambda ims: ims[0].update(url="https://x.org/1.jpg"), "[0]: key 'url' 'https://x.org/1.jpg' does not end in '<folder>/1.jpg'"),
    (lambda ims: ims[1].update(width=0), "[1]: image size 0x400 is not positive"),
    (lambda ims: ims[1].update(height=0), "[1]: image size 500x0 is not positive"),
    (lambda ims: ims.clear() or ims.append([]), "[0]: expected a JSON object, got list []"),
])
def test_visual_genome_image_data_errors_in_full(tmp_path, edit, message):
    from phrasedet.data.datasets import read_vg_image_data

    from .test_visual_genome import _write_json

    path = _write_json(str(tmp_path / "image_data.json"), _vg_images(edit))
    assert _message(BadAnnotationError, read_vg_image_data, path) == f"{path}: {message}"


def test_visual_genome_urls_of_two_and_three_parts_and_one_pixel_images(tmp_path):
    from phrasedet.data.datasets import read_vg_image_data

    from .test_visual_genome import _write_json

    def edit(ims):
        ims[0].update(url="https://x.org/VG_100K/1.jpg")  # two path parts: the least allowed
        ims[1].update(url="https://x.org/a/VG_100K_2/2.jpg", width=1, height=1)
    images = read_vg_image_data(_write_json(str(tmp_path / "image_data.json"), _vg_images(edit)))
    assert (images[1].folder, images[1].file) == ("VG_100K", "1.jpg")
    assert (images[2].folder, images[2].file, images[2].width, images[2].height) == ("VG_100K_2", "2.jpg", 1, 1)


def test_visual_genome_files_are_named_and_must_be_lists(tmp_path):
    from phrasedet.data.datasets import load_visual_genome_pointing, read_vg_image_data

    from .test_visual_genome import write_vg_root

    paths = write_vg_root(str(tmp_path), regions={"id": 1})
    assert _message(BadAnnotationError, load_visual_genome_pointing, *paths[:4]) == (
        f"{paths[0]}: expected a JSON list, got dict")
    os.remove(paths[0])
    assert _message(FileNotFoundError, load_visual_genome_pointing, *paths[:4]) == (
        f"Visual Genome region_descriptions.json {paths[0]!r} does not exist")
    os.remove(paths[1])
    assert _message(FileNotFoundError, read_vg_image_data, paths[1]) == (
        f"Visual Genome image_data.json {paths[1]!r} does not exist")


@pytest.mark.parametrize("value, ok", [(0, True), (2, True), (-1, False), (2.5, False), (True, False)])
def test_visual_genome_min_phrase_chars_is_a_non_negative_integer(tmp_path, value, ok):
    if ok:
        assert len(_vg(tmp_path, min_phrase_chars=value)[0]) == 3
        return
    with pytest.raises(ValueError) as e:
        _vg(tmp_path, min_phrase_chars=value)
    assert str(e.value) == f"min_phrase_chars must be a non-negative integer, got {value!r}"


def test_visual_genome_counts_every_image_left_out(tmp_path, caplog):
    from .test_visual_genome import URL, _region, image_data, region_descriptions

    regions = region_descriptions() + [{"id": 8, "regions": []},  # absent from image_data.json, like 9
                                       {"id": 7, "regions": [_region(71, 7, "", 1, 1, 5, 5)]}]  # no query, like 6
    images = image_data() + [{"image_id": 7, "coco_id": 700, "width": 50, "height": 50, "url": URL.format("VG_100K", 7)}]
    with caplog.at_level(logging.INFO, logger="phrasedet.data.datasets.visual_genome"):
        _, paths = _vg(tmp_path, regions, images)
    assert (f"Of 9 images of {paths[0]}, left out: 2 not in image_data.json, 1 without coco_id, 1 whose coco_id "
            f"is not in {paths[3]}, no Karpathy exclusion, 2 with no region left.") in caplog.messages[-1]
