import json
import os
import pickle

import pytest
from PIL import Image

from phrasedet.data.datasets import BadAnnotationError, load_referit


def _write_refclef(root, refs=None, instances=None, images=((25123, 100, 80), (25124, 60, 40))):
    refclef = os.path.join(root, "refclef")
    os.makedirs(refclef, exist_ok=True)
    image_root = os.path.join(root, "images", "saiapr_tc-12")
    for image_id, w, h in images:
        folder = os.path.join(image_root, "25", "images")
        os.makedirs(folder, exist_ok=True)
        Image.new("RGB", (w, h)).save(os.path.join(folder, f"{image_id}.jpg"))
    if instances is None:
        instances = {
            "images": [{"id": i, "file_name": f"{i}.jpg", "width": w, "height": h} for i, w, h in images],
            "annotations": [
                {"id": 1, "image_id": 25123, "bbox": [10.5, 20.0, 30.0, 40.0], "category_id": 3},
                {"id": 2, "image_id": 25123, "bbox": [0, 0, 100, 80], "category_id": 1},
            ],
            "categories": [{"id": 1, "name": "sky"}, {"id": 3, "name": "man"}],
        }
    if refs is None:
        refs = [
            {"ref_id": 7, "ann_id": 1, "image_id": 25123, "category_id": 3, "split": "train", "sent_ids": [70, 71],
             "sentences": [{"sent_id": 70, "raw": "Man on the LEFT", "sent": "man on the left", "tokens": []},
                           {"sent_id": 71, "raw": "guy", "sent": "guy", "tokens": []}]},
            {"ref_id": 8, "ann_id": 2, "image_id": 25123, "category_id": 1, "split": "test", "sent_ids": [80],
             "sentences": [{"sent_id": 80, "raw": "sky", "sent": "sky", "tokens": []}]},
        ]
    with open(os.path.join(refclef, "refs(berkeley).p"), "wb") as f:
        pickle.dump(refs, f, protocol=2)
    with open(os.path.join(refclef, "instances.json"), "w") as f:
        json.dump(instances, f)
    return refclef, image_root


def test_sentences_become_instances_with_xyxy_boxes(tmp_path):
    refclef, image_root = _write_refclef(str(tmp_path))
    (record,) = load_referit(refclef, image_root, "train")
    assert record["image_id"] == "25123" and (record["width"], record["height"]) == (100, 80)
    assert record["file_name"].endswith("saiapr_tc-12/25/images/25123.jpg")  # found by scanning the tree
    anns = record["annotations"]
    assert [(a["phrase_raw"], a["phrase"], a["bbox"], a["sent_id"]) for a in anns] == [
        ("Man on the LEFT", "man left", [10.5, 20.0, 40.5, 60.0], 70),
        ("guy", "guy", [10.5, 20.0, 40.5, 60.0], 71),
    ]
    assert record["captions"] == ["Man on the LEFT", "guy"] and [a["caption_index"] for a in anns] == [0, 1]
    assert anns[0]["chain_id"] == "1" and anns[0]["ref_id"] == 7


def test_trainval_and_test_splits(tmp_path):
    refclef, image_root = _write_refclef(str(tmp_path))
    (test,) = load_referit(refclef, image_root, "test")
    assert [a["phrase"] for a in test["annotations"]] == ["sky"]
    with pytest.raises(KeyError, match="ReferIt split 'dev' unknown"):
        load_referit(refclef, image_root, "dev")


def test_hu_image_list_keeps_images_without_refs_and_counts_absent_ones(tmp_path, caplog):
    refclef, image_root = _write_refclef(str(tmp_path))
    imlist = tmp_path / "list.txt"
    imlist.write_text("25123\n25124\n99999\n")
    with caplog.at_level("INFO"):
        records = load_referit(refclef, image_root, image_list=str(imlist))
    assert [r["image_id"] for r in records] == ["25123", "25124"]
    assert len(records[0]["annotations"]) == 3 and records[1]["annotations"] == []
    assert "1 listed images absent from instances.json" in caplog.text


def test_empty_sentence_is_a_counted_skip(tmp_path, caplog):
    refs = [{"ref_id": 7, "ann_id": 1, "image_id": 25123, "split": "train",
             "sentences": [{"sent_id": 70, "raw": "  ", "sent": ""}, {"sent_id": 71, "raw": "guy"}]}]
    refclef, image_root = _write_refclef(str(tmp_path), refs=refs)
    with caplog.at_level("INFO"):
        (record,) = load_referit(refclef, image_root, "train")
    assert [a["phrase"] for a in record["annotations"]] == ["guy"]
    assert "skipped 1 empty sentences" in caplog.text


def test_bad_inputs_name_file_and_key(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"refs\(berkeley\).p"):
        load_referit(str(tmp_path / "missing"), str(tmp_path), "train")
    refs = [{"ref_id": 9, "ann_id": 5, "image_id": 25123, "split": "train", "sentences": [{"raw": "x"}]}]
    refclef, image_root = _write_refclef(str(tmp_path), refs=refs)
    with pytest.raises(BadAnnotationError, match=r"ref_id 9: ann_id 5 is not in .*instances.json"):
        load_referit(refclef, image_root, "train")
    refs = [{"ref_id": 9, "image_id": 25123, "split": "train", "sentences": []}]
    refclef, image_root = _write_refclef(str(tmp_path), refs=refs)
    with pytest.raises(BadAnnotationError, match=r"refs\(berkeley\)\.p: record 0 \(ref_id 9\): missing key 'ann_id'"):
        load_referit(refclef, image_root, "train")


def test_box_outside_image_and_missing_image(tmp_path):
    refclef, image_root = _write_refclef(str(tmp_path))
    inst = json.load(open(os.path.join(refclef, "instances.json")))
    inst["annotations"][0]["bbox"] = [80, 20, 30, 40]
    json.dump(inst, open(os.path.join(refclef, "instances.json"), "w"))
    with pytest.raises(BadAnnotationError, match=r"annotation id 1 \(ref_id 7\): box \[80, 20, 110, 60\].*outside the 100x80"):
        load_referit(refclef, image_root, "train")
    os.remove(os.path.join(image_root, "25", "images", "25123.jpg"))
    with pytest.raises(FileNotFoundError, match="25123.jpg"):
        load_referit(refclef, image_root, "train", box_policy="clip")


def _instances(images=((25123, 100, 80), (25124, 60, 40))):
    return {"images": [{"id": i, "file_name": f"{i}.jpg", "width": w, "height": h} for i, w, h in images],
            "annotations": [{"id": 1, "image_id": 25123, "bbox": [10.5, 20.0, 30.0, 40.0]},
                            {"id": 2, "image_id": 25123, "bbox": [0, 0, 100, 80]}]}


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["annotations"][1].pop("bbox"), r"instances.json: annotations\[1\] \(id 2\): missing key 'bbox'"),
    (lambda d: d["images"][0].pop("width"), r"instances.json: images\[0\] \(id 25123\): missing key 'width'"),
    (lambda d: d["images"][1].update(height="40"), r"images\[1\] \(id 25124\): key 'height' must be a positive number, got '40'"),
    (lambda d: d["annotations"][0].update(bbox=[1, 2, 3]), r"annotations\[0\] \(id 1\): key 'bbox' must be 4 finite numbers, got \[1, 2, 3\]"),
    (lambda d: d.pop("images"), r"instances.json: top level: missing key 'images'"),
    (lambda d: d.update(annotations={}), r"instances.json: top level: key 'annotations' must be a list, got \{\}"),
])
def test_an_instances_record_without_a_key_the_loader_reads_names_file_record_and_key(tmp_path, edit, message):
    data = _instances()
    edit(data)
    refclef, image_root = _write_refclef(str(tmp_path), instances=data)
    with pytest.raises(BadAnnotationError, match=message):
        load_referit(refclef, image_root, "train")


def test_instances_json_with_a_byte_order_mark_loads_and_a_bad_byte_names_its_position(tmp_path):
    refclef, image_root = _write_refclef(str(tmp_path))
    path = os.path.join(refclef, "instances.json")
    data = open(path, "rb").read()
    open(path, "wb").write(b"\xef\xbb\xbf" + data)
    (record,) = load_referit(refclef, image_root, "train")
    assert record["width"] == 100
    open(path, "wb").write(data.replace(b"25123.jpg", b"25123\xff.jpg", 1))
    with pytest.raises(BadAnnotationError, match=r"instances.json:1:\d+: byte 0xff \(byte offset \d+\) is not valid UTF-8"):
        load_referit(refclef, image_root, "train")
