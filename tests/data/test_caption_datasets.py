"""Caption datasets for image-sentence retrieval: the file helpers, the five loaders, registration."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from detectron2.data import DatasetCatalog, MetadataCatalog

from phrasedet.data.datasets import (
    BadAnnotationError,
    load_coco_karpathy,
    load_flickr30k_entities,
    load_flickr30k_entities_captions,
    load_flickr30k_karpathy,
    load_flickr30k_token_captions,
    load_json_file,
    load_vsepp_precomp,
    read_text_lines,
    register_coco_karpathy,
    register_flickr30k_captions,
    register_vsepp_precomp,
)

from . import caption_fixtures as fx
from .flickr_fixture import CAPTIONS, write_flickr_root

BOM = b"\xef\xbb\xbf"
RECORD_KEYS = {"file_name", "image_id", "dataset", "captions", "caption_ids"}


def _view(records, *keys):
    return [tuple(r[k] for k in keys) for r in records]


# ---------------------------------------------------------------- files.py


def test_text_lines_drop_bom_and_line_ends(tmp_path):
    path = fx.write_text(str(tmp_path / "a.txt"), ["first\r", "", "third\u2028still third"], prefix=BOM)
    assert read_text_lines(path) == ["first", "", "third\u2028still third"]


def test_undecodable_byte_names_line_column_and_byte(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"fine\nalso fine\nbad \xff here\n")
    with pytest.raises(BadAnnotationError, match=r"a\.txt:3:5: byte 0xff \(byte offset 19\) is not valid UTF-8"):
        read_text_lines(str(path))
    path.write_bytes(b'{"a":\n "\xe9t\xe9"}')
    with pytest.raises(BadAnnotationError, match=r"a\.txt:2:3: byte 0xe9 \(byte offset 8\)"):
        load_json_file(str(path))


def test_json_bom_and_syntax_error_position(tmp_path):
    path = fx.write_json(str(tmp_path / "a.json"), {"images": []}, prefix=BOM)
    assert load_json_file(path) == {"images": []}
    bad = tmp_path / "b.json"
    data = BOM + '{"images": [\n  {"raw": "café"},\n  {"raw": "x",}\n]}'.encode("utf-8")
    bad.write_bytes(data)
    # the error is the '}' at line 3, column 15: after 3 BOM bytes, 13 + 20 (a 2-byte é) line bytes and 14 more
    assert data[50:51] == b"}"
    with pytest.raises(BadAnnotationError, match=r"b\.json:3:15: invalid JSON \(byte offset 50\): Expecting property name"):
        load_json_file(str(bad))


def test_missing_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"token file '.*nothing\.token' does not exist"):
        read_text_lines(str(tmp_path / "nothing.token"), "token file")
    with pytest.raises(FileNotFoundError, match=r"JSON file '.*nothing\.json' does not exist"):
        load_json_file(str(tmp_path / "nothing.json"))


# ---------------------------------------------------------------- Flickr30K Entities Sentences


def _entities(tmp_path, unrelated=None, **kw):
    ann_root, image_root = write_flickr_root(str(tmp_path), write_image=False)
    os.rename(os.path.join(ann_root, "Annotations"), os.path.join(ann_root, "no_Annotations"))  # not needed
    unrelated_file = None
    if unrelated is not None:
        unrelated_file = fx.write_text(str(tmp_path / "UNRELATED_CAPTIONS"), ["# <imageID> <sentence number>"] + unrelated)
    return load_flickr30k_entities_captions(ann_root, image_root, os.path.join(ann_root, "train.txt"), unrelated_file, **kw)


def test_entities_captions_are_stripped_sentences(tmp_path, caplog):
    with caplog.at_level("INFO"):
        (record,) = _entities(tmp_path, unrelated=["1000092795 5"])
    assert set(record) == RECORD_KEYS  # no annotations, no size, no image read
    assert record["file_name"] == os.path.join(str(tmp_path), "flickr30k-images", "1000092795.jpg")
    assert (record["image_id"], record["dataset"]) == ("1000092795", "flickr30k")
    assert record["captions"] == fx.FLICKR_1000092795  # unrelated caption 5 kept by default
    assert record["caption_ids"] == [f"1000092795#{i}" for i in range(5)]
    assert "1 images of" in caplog.text and "5 captions; 1 captions listed in UNRELATED_CAPTIONS kept" in caplog.text


def test_entities_captions_drop_unrelated_keeps_ids(tmp_path, caplog):
    with caplog.at_level("INFO"):
        (record,) = _entities(tmp_path, unrelated=["1000092795 2", "1000092795 5"], drop_unrelated=True)
    assert record["captions"] == [fx.FLICKR_1000092795[i] for i in (0, 2, 3)]
    assert record["caption_ids"] == ["1000092795#0", "1000092795#2", "1000092795#3"]
    assert "3 captions; 2 captions listed in UNRELATED_CAPTIONS dropped" in caplog.text


def test_entities_captions_errors(tmp_path):
    with pytest.raises(BadAnnotationError, match=r"UNRELATED_CAPTIONS: image 1000092795 sentence 6 but .*Sentences/1000092795.txt has 5 captions"):
        _entities(tmp_path, unrelated=["1000092795 6"])
    ann_root = os.path.join(str(tmp_path), "flickr30k_entities")
    with open(os.path.join(ann_root, "train.txt"), "a") as f:
        f.write("36979\n")
    with pytest.raises(FileNotFoundError, match=r"image 36979 is in the split list but .*Sentences/36979.txt does not exist"):
        load_flickr30k_entities_captions(ann_root, str(tmp_path), os.path.join(ann_root, "train.txt"))
    with pytest.raises(FileNotFoundError, match=r"Flickr30K Entities root '.*nowhere' does not exist"):
        load_flickr30k_entities_captions(str(tmp_path / "nowhere"), str(tmp_path), os.path.join(ann_root, "train.txt"))


def test_entities_captions_markup_errors_come_from_the_parser(tmp_path):
    ann_root, image_root = write_flickr_root(str(tmp_path), captions=CAPTIONS[:2] + ["Two guys] look ."], write_image=False)
    with pytest.raises(BadAnnotationError, match=r"Sentences/1000092795.txt:3: '\]' without '\['"):
        load_flickr30k_entities_captions(ann_root, image_root, os.path.join(ann_root, "train.txt"))


# ---------------------------------------------------------------- Flickr30K token file


def _token_file(tmp_path, lines=None, prefix=b""):
    return fx.write_text(str(tmp_path / "results_20130124.token"), fx.token_lines() if lines is None else lines, prefix)


def test_token_captions_ordered_by_number_in_file_order(tmp_path):
    records = load_flickr30k_token_captions(_token_file(tmp_path, prefix=BOM), "/images")
    assert _view(records, "image_id", "file_name", "dataset") == [
        ("10002456", "/images/10002456.jpg", "flickr30k"), ("1000092795", "/images/1000092795.jpg", "flickr30k"),
    ]
    assert records[1]["captions"] == fx.FLICKR_1000092795  # written as #3 #0 #4 #1 #2
    assert records[1]["caption_ids"] == [f"1000092795.jpg#{n}" for n in range(5)]
    assert records[0]["captions"] == fx.FLICKR_10002456 and set(records[0]) == RECORD_KEYS


def test_token_captions_with_split_list(tmp_path, caplog):
    split = fx.write_text(str(tmp_path / "test.txt"), ["1000092795"])
    with caplog.at_level("INFO"):
        (record,) = load_flickr30k_token_captions(_token_file(tmp_path), "/images", split)
    assert record["image_id"] == "1000092795" and record["captions"] == fx.FLICKR_1000092795
    assert "5 captions; 1 images of the token file not in the split" in caplog.text
    fx.write_text(split, ["1000092795", "36979", "10002456"])
    with pytest.raises(BadAnnotationError, match=r"results_20130124.token: no caption of image 36979 \(listed in .*test.txt; 1 listed"):
        load_flickr30k_token_captions(_token_file(tmp_path), "/images", split)


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("1000092795.jpg#5 A man .", r":7: no tab between '<image file>#<n>' and the caption"),
        ("1000092795.jpg\tA man .", r":7: key '1000092795.jpg' is not '<image file>#<n>'"),
        ("1000092795.jpg#five\tA man .", r":7: caption number 'five' of key '1000092795.jpg#five' is not a non-negative integer"),
        ("1000092795.jpg#-1\tA man .", r":7: caption number '-1' of key"),
        ("10002456.jpg#2\tAgain .", r":7: key '10002456.jpg#2' already on line 3"),
        ("1000092795.jpg#5\t  ", r":7: empty caption"),
    ],
)
def test_token_file_errors_name_file_and_line(tmp_path, bad_line, message):
    lines = fx.token_lines()
    lines.insert(6, bad_line)
    with pytest.raises(BadAnnotationError, match=r"results_20130124\.token" + message):
        load_flickr30k_token_captions(_token_file(tmp_path, lines), "/images")


def test_token_file_undecodable_byte(tmp_path):
    path = _token_file(tmp_path)
    data = open(path, "rb").read().replace(b"Workers", b"W\xf6rkers")
    open(path, "wb").write(data)
    with pytest.raises(BadAnnotationError, match=r"results_20130124\.token:2:17: byte 0xf6 \(byte offset 94\)"):
        load_flickr30k_token_captions(path, "/images")


# ---------------------------------------------------------------- Karpathy: Flickr30K


def _flickr_json(tmp_path, data=None, prefix=b""):
    return fx.write_json(str(tmp_path / "dataset_flickr30k.json"), fx.karpathy_flickr() if data is None else data, prefix)


def test_flickr_karpathy_splits(tmp_path):
    path = _flickr_json(tmp_path, prefix=BOM)
    (test,) = load_flickr30k_karpathy(path, "/f30k", "test")
    assert test == {
        "file_name": "/f30k/10002456.jpg", "image_id": "10002456", "dataset": "flickr30k",
        "captions": fx.FLICKR_10002456, "caption_ids": ["5", "6", "7", "8", "9"],
    }
    assert _view(load_flickr30k_karpathy(path, "/f30k", "train"), "image_id", "caption_ids") == [
        ("1000092795", ["0", "1", "2", "3", "4"]),
    ]
    (val,) = load_flickr30k_karpathy(path, "/f30k", "val")
    assert val["image_id"] == "1001773457" and val["captions"] == fx.FLICKR_1001773457


def _broken_flickr(change):
    data = fx.karpathy_flickr()
    change(data["images"])
    return data


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda ims: ims[1].pop("split"), r"images\[1\]: missing key 'split'"),
        (lambda ims: ims[2].pop("filename"), r"images\[2\]: missing key 'filename'"),
        (lambda ims: ims[1]["sentences"][3].pop("sentid"), r"images\[1\]\.sentences\[3\]: missing key 'sentid'"),
        (lambda ims: ims[0]["sentences"][1].update(raw=" \n"), r"images\[0\]\.sentences\[1\]\.raw: empty caption"),
        (lambda ims: ims[2].update(split="dev"), r"images\[2\]: unknown split 'dev' \(expected one of train, val, test, restval\)"),
        (lambda ims: ims.append([]), r"images\[3\]: expected a JSON object, got list"),
    ],
)
def test_flickr_karpathy_errors_name_file_index_and_key(tmp_path, change, message):
    path = _flickr_json(tmp_path, _broken_flickr(change))
    with pytest.raises(BadAnnotationError, match=r"dataset_flickr30k\.json: " + message):
        load_flickr30k_karpathy(path, "/f30k", "test")


def test_flickr_karpathy_bad_split_and_syntax(tmp_path):
    path = _flickr_json(tmp_path)
    with pytest.raises(KeyError, match=r"Karpathy split 'restval' unknown; choose from \['train', 'val', 'test'\]"):
        load_flickr30k_karpathy(path, "/f30k", "restval")
    with pytest.raises(BadAnnotationError, match=r"dataset_flickr30k\.json: missing key 'images'"):
        load_flickr30k_karpathy(_flickr_json(tmp_path, {"dataset": "flickr30k"}), "/f30k", "test")
    with open(path, "w") as f:
        f.write('{"images": [\n{"filename": "1.jpg" "split": "test"}]}')
    with pytest.raises(BadAnnotationError, match=r"dataset_flickr30k\.json:2:22: invalid JSON \(byte offset 34\): Expecting ','"):
        load_flickr30k_karpathy(path, "/f30k", "test")


# ---------------------------------------------------------------- Karpathy: COCO


def _coco_expected(cocoid, source):
    filepath, _, caps, sentid, ann_ids, _, _ = fx.COCO_IMAGES[cocoid]
    if source == "karpathy":
        pairs = [(str(sentid + k), c) for k, c in enumerate(caps)]
    else:
        pairs = sorted(zip(ann_ids, caps))
    return [" ".join(c.split()) for _, c in pairs], [str(i) for i, _ in pairs]


def test_coco_karpathy_train_takes_restval_and_max_captions_is_counted(tmp_path, caplog):
    _, karpathy, _ = fx.write_coco_root(str(tmp_path))
    with caplog.at_level("INFO"):
        records = load_coco_karpathy(karpathy, "/coco", "train")
    assert _view(records, "image_id", "file_name", "dataset") == [
        ("522418", "/coco/val2014/COCO_val2014_000000522418.jpg", "coco"),  # restval, file order
        ("318556", "/coco/train2014/COCO_train2014_000000318556.jpg", "coco"),
    ]
    captions, ids = _coco_expected(522418, "karpathy")
    assert (records[0]["captions"], records[0]["caption_ids"]) == (captions[:5], ids[:5])
    assert records[0]["captions"][0] == "A woman wearing a net on her head cutting a cake."  # whitespace collapsed
    assert set(records[0]) == RECORD_KEYS
    assert "1 captions beyond max_captions=5 left out (from 1 images)" in caplog.text
    assert "split train takes 2 of 4 images (1 train, 1 val, 1 test, 1 restval) with restval" in caplog.text


def test_coco_karpathy_without_restval_and_all_captions(tmp_path):
    _, karpathy, _ = fx.write_coco_root(str(tmp_path))
    assert _view(load_coco_karpathy(karpathy, "/coco", "train", restval_to_train=False), "image_id") == [("318556",)]
    (restval, _) = load_coco_karpathy(karpathy, "/coco", "train", max_captions=None)
    assert (restval["captions"], restval["caption_ids"]) == _coco_expected(522418, "karpathy")
    with pytest.raises(ValueError, match="max_captions must be a positive integer or None, got 0"):
        load_coco_karpathy(karpathy, "/coco", "train", max_captions=0)


def test_coco_official_captions_by_annotation_id_with_size(tmp_path, caplog):
    _, karpathy, official = fx.write_coco_root(str(tmp_path))
    with caplog.at_level("INFO"):
        (test,) = load_coco_karpathy(karpathy, "/coco", "test", captions_files=official)
        (restval, train) = load_coco_karpathy(karpathy, "/coco", "train", captions_files=official)
    assert (test["captions"], test["caption_ids"]) == _coco_expected(391895, "official")
    assert test["caption_ids"] == ["156", "509", "603", "1413", "1636"]
    assert (test["height"], test["width"], test["image_id"]) == (360, 640, "391895")
    captions, ids = _coco_expected(522418, "official")
    assert (restval["captions"], restval["caption_ids"]) == (captions[:5], ids[:5]) and ids[5] == "4799"
    assert (train["height"], train["width"]) == (640, 480)
    assert "captions from " + ", ".join(official) in caplog.text


def test_coco_official_errors(tmp_path):
    coco, karpathy, (train_file, val_file) = fx.write_coco_root(str(tmp_path))
    with pytest.raises(BadAnnotationError, match=r"dataset_coco\.json: images\[0\]: cocoid 391895 has no caption in .*captions_train2014\.json"):
        load_coco_karpathy(karpathy, "/coco", "test", captions_files=(train_file,))
    data = fx.official_coco("val2014")
    data["annotations"][7].pop("caption")
    fx.write_json(val_file, data)
    with pytest.raises(BadAnnotationError, match=r"captions_val2014\.json: annotations\[7\] \(id 1099\): missing key 'caption'"):
        load_coco_karpathy(karpathy, "/coco", "test", captions_files=(train_file, val_file))
    data = fx.official_coco("val2014")
    data["images"] = data["images"][1:]
    fx.write_json(val_file, data)
    with pytest.raises(BadAnnotationError, match=r"images\[0\]: cocoid 391895 is not in the 'images' of .*captions_val2014\.json"):
        load_coco_karpathy(karpathy, "/coco", "test", captions_files=(train_file, val_file))


def test_coco_karpathy_requires_cocoid_and_filepath(tmp_path):
    data = fx.karpathy_coco()
    data["images"][2].pop("cocoid")
    path = fx.write_json(str(tmp_path / "dataset_coco.json"), data)
    with pytest.raises(BadAnnotationError, match=r"dataset_coco\.json: images\[2\]: missing key 'cocoid'"):
        load_coco_karpathy(path, "/coco", "test")
    data = fx.karpathy_coco()
    data["images"][1].pop("filepath")
    fx.write_json(path, data)
    with pytest.raises(BadAnnotationError, match=r"dataset_coco\.json: images\[1\]: missing key 'filepath'"):
        load_coco_karpathy(path, "/coco", "test")


# ---------------------------------------------------------------- VSE++ precomputed features


@pytest.mark.parametrize("rows, step", [(2, 1), (10, 5)])
def test_precomp_records_point_at_feature_rows(tmp_path, rows, step):
    _, ims = fx.write_precomp(str(tmp_path), rows=rows)
    records = load_vsepp_precomp(str(tmp_path), "test")
    assert records[1] == {
        "file_name": "", "image_id": "1", "dataset": "vsepp_precomp", "captions": fx.FLICKR_10002456,
        "caption_ids": ["5", "6", "7", "8", "9"], "feature_file": ims, "feature_row": step,
    }
    assert _view(records, "image_id", "feature_row") == [("0", 0), ("1", step)]
    assert records[0]["captions"] == fx.FLICKR_1000092795


def test_precomp_count_errors_name_both_files(tmp_path):
    fx.write_precomp(str(tmp_path), rows=2, captions=fx.PRECOMP_CAPTIONS[:9])
    with pytest.raises(BadAnnotationError, match=r"test_caps\.txt: 9 captions is not a positive multiple of 5 .*test_ims\.npy have 2 rows"):
        load_vsepp_precomp(str(tmp_path), "test")
    fx.write_precomp(str(tmp_path), rows=3)
    with pytest.raises(BadAnnotationError, match=r"test_ims\.npy: 3 feature rows, but .*test_caps\.txt has 10 captions: expected 2 .* or 10"):
        load_vsepp_precomp(str(tmp_path), "test")


def test_precomp_bad_files(tmp_path):
    fx.write_precomp(str(tmp_path), captions=fx.PRECOMP_CAPTIONS[:3] + [""] + fx.PRECOMP_CAPTIONS[4:])
    with pytest.raises(BadAnnotationError, match=r"test_caps\.txt:4: empty caption"):
        load_vsepp_precomp(str(tmp_path), "test")
    fx.write_precomp(str(tmp_path))
    (tmp_path / "test_ims.npy").write_bytes(b"not an array")
    with pytest.raises(BadAnnotationError, match=r"test_ims\.npy: not a numpy file"):
        load_vsepp_precomp(str(tmp_path), "test")
    with pytest.raises(FileNotFoundError, match=r"VSE\+\+ captions file '.*dev_caps\.txt' does not exist"):
        load_vsepp_precomp(str(tmp_path), "dev")
    os.remove(tmp_path / "test_ims.npy")
    with pytest.raises(FileNotFoundError, match=r"VSE\+\+ image features file '.*test_ims\.npy' does not exist"):
        load_vsepp_precomp(str(tmp_path), "test")


def test_precomp_reads_only_the_npy_header(tmp_path, monkeypatch):
    fx.write_precomp(str(tmp_path), rows=10)
    modes = []
    real_load = np.load
    monkeypatch.setattr(np, "load", lambda *a, **kw: modes.append(kw.get("mmap_mode")) or real_load(*a, **kw))
    load_vsepp_precomp(str(tmp_path), "test")
    assert modes == ["r"]


# ---------------------------------------------------------------- registration


def test_register_functions_put_loaders_in_the_catalogs(tmp_path):
    ann_root, image_root = write_flickr_root(str(tmp_path), write_image=False)
    _, karpathy, official = fx.write_coco_root(str(tmp_path))
    fx.write_precomp(str(tmp_path / "precomp"))
    names = [f"test_captions_{k}_{os.getpid()}_{tmp_path.name}" for k in ("flickr", "coco", "precomp")]
    register_flickr30k_captions(names[0], ann_root, image_root, os.path.join(ann_root, "train.txt"), split="train")
    register_coco_karpathy(names[1], karpathy, "/coco", "test", captions_files=list(official))
    register_vsepp_precomp(names[2], str(tmp_path / "precomp"), "test")
    assert DatasetCatalog.get(names[0])[0]["captions"] == fx.FLICKR_1000092795
    assert DatasetCatalog.get(names[1])[0]["caption_ids"] == ["156", "509", "603", "1413", "1636"]
    assert [r["feature_row"] for r in DatasetCatalog.get(names[2])] == [0, 1]
    for name, dataset in zip(names, ("flickr30k", "coco", "vsepp_precomp")):
        meta = MetadataCatalog.get(name)
        assert (meta.evaluator_type, meta.dataset) == ("retrieval", dataset)
    assert MetadataCatalog.get(names[0]).split == "train"
    os.remove(os.path.join(ann_root, "Sentences", "1000092795.txt"))  # parsed once per process
    assert DatasetCatalog.get(names[0])[0]["captions"] == fx.FLICKR_1000092795


def _real_root(root):
    """Every real caption format under one ``$PHRASEDET_DATASETS`` root; the root's own Flickr30K
    Entities split lists (they win over the shipped ones): train 1000092795, test 10002456."""
    write_flickr_root(root, write_image=False)
    fx.write_text(os.path.join(root, "flickr30k_entities", "test.txt"), ["10002456"])
    fx.write_json(os.path.join(root, "flickr30k", "dataset_flickr30k.json"), fx.karpathy_flickr())
    fx.write_text(os.path.join(root, "flickr30k", "results_20130124.token"), fx.token_lines())
    fx.write_coco_root(root)
    fx.write_precomp(os.path.join(root, "data", "f30k_precomp"), "dev", rows=10)
    fx.write_precomp(os.path.join(root, "data", "coco_precomp"), "testall")


def test_real_names_read_the_documented_layout(tmp_path, monkeypatch):
    root = str(tmp_path)
    _real_root(root)
    monkeypatch.setenv("PHRASEDET_DATASETS", root)
    (entities,) = DatasetCatalog.get("flickr30k_entities_captions_train")
    assert entities["captions"] == fx.FLICKR_1000092795 and entities["file_name"] == os.path.join(root, "flickr30k-images", "1000092795.jpg")
    (karpathy,) = DatasetCatalog.get("flickr30k_karpathy_test")
    assert karpathy["image_id"] == "10002456" and karpathy["file_name"] == os.path.join(root, "flickr30k-images", "10002456.jpg")
    (token,) = DatasetCatalog.get("flickr30k_token_test")
    assert token["caption_ids"] == [f"10002456.jpg#{n}" for n in range(5)]
    (coco,) = DatasetCatalog.get("coco_karpathy_test")
    assert coco["caption_ids"] == ["156", "509", "603", "1413", "1636"] and coco["height"] == 360
    assert coco["file_name"] == os.path.join(root, "coco", "val2014", "COCO_val2014_000000391895.jpg")
    assert [r["feature_row"] for r in DatasetCatalog.get("vsepp_f30k_precomp_dev")] == [0, 5]
    assert [r["image_id"] for r in DatasetCatalog.get("vsepp_coco_precomp_testall")] == ["0", "1"]
    assert MetadataCatalog.get("vsepp_coco_precomp_testall").evaluator_type == "retrieval"


def test_real_coco_uses_karpathy_captions_without_both_official_files(tmp_path, monkeypatch):
    root = str(tmp_path)
    fx.write_coco_root(root)
    os.remove(os.path.join(root, "coco", "annotations", "captions_train2014.json"))
    monkeypatch.setenv("PHRASEDET_DATASETS", root)
    (coco,) = DatasetCatalog.get("coco_karpathy_test")
    assert coco["caption_ids"] == [str(770337 + k) for k in range(5)] and "height" not in coco


@pytest.mark.parametrize(
    "name, folder",
    [
        ("flickr30k_entities_captions_test", "flickr30k_entities"),
        ("flickr30k_karpathy_val", "flickr30k"),
        ("flickr30k_token_train", "flickr30k"),
        ("coco_karpathy_train", "coco"),
        ("vsepp_f30k_precomp_dev", "f30k_precomp"),
        ("vsepp_coco_precomp_testall", "coco_precomp"),
    ],
)
def test_missing_real_root_says_where_to_put_it(tmp_path, monkeypatch, name, folder):
    monkeypatch.setenv("PHRASEDET_DATASETS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=rf"not found at '.*{folder}'\. Set PHRASEDET_DATASETS"):
        DatasetCatalog.get(name)


def test_registration_reads_no_file(tmp_path):
    """Importing phrasedet registers every name without generating or reading any dataset."""
    env = dict(os.environ, PHRASEDET_CACHE=str(tmp_path / "cache"), PHRASEDET_DATASETS=str(tmp_path / "none"))
    code = (
        "import phrasedet; from detectron2.data import DatasetCatalog as C; "
        "names = [n for n in C.list() if 'caption' in n or 'karpathy' in n or 'precomp' in n or 'token' in n]; "
        "print(len(names))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[-1] == "25"  # 22, and the long-tailed world's builtin_longtail_flickr30k_captions_{train,val,test}
    assert not os.path.exists(tmp_path / "cache") and not os.path.exists(tmp_path / "none")


# ---------------------------------------------------------------- built-in dataset


@pytest.mark.parametrize("split, count", [("train", 600), ("val", 60), ("test", 150)])
def test_builtin_captions_equal_the_entities_loader(builtin_root, split, count):
    records = DatasetCatalog.get(f"builtin_flickr30k_captions_{split}")
    ann_root = os.path.join(builtin_root, "flickr30k_entities")
    entities = load_flickr30k_entities(ann_root, os.path.join(builtin_root, "flickr30k-images"),
                                       os.path.join(ann_root, f"{split}.txt"), check_images=False)
    assert len(records) == count and all(len(r["captions"]) == 5 for r in records)
    assert _view(records, "image_id", "captions", "file_name") == _view(entities, "image_id", "captions", "file_name")
    assert all(r["caption_ids"] == [f"{r['image_id']}#{k}" for k in range(5)] for r in records)
    meta = MetadataCatalog.get(f"builtin_flickr30k_captions_{split}")
    assert (meta.evaluator_type, meta.dataset, meta.split, meta.builtin) == ("retrieval", "flickr30k", split, True)
    assert json.dumps(records)  # plain JSON-able dicts
