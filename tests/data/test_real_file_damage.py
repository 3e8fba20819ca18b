"""Issue 23: damage found in real files, each once, with the exact message (or the documented
counted skip); and decomposed Unicode (NFD) read as the composed form (NFC) by every reader."""
import copy
import json
import os
import unicodedata

import numpy as np
import pytest

from phrasedet.data.datasets import (BadAnnotationError, load_coco_karpathy, load_flickr30k_entities,
                                     load_flickr30k_karpathy, load_flickr30k_token_captions, load_referit,
                                     load_visual_genome_pointing, load_vsepp_precomp)
from phrasedet.data.image_features import attach_image_features, read_feature_row, write_image_features
from phrasedet.evaluation import PhraseColumns
from phrasedet.text import caption_words, nfc, normalize_phrase

from . import caption_fixtures as fx
from .flickr_fixture import CAPTIONS, write_flickr_root
from .test_referit import _write_refclef
from .test_visual_genome import _region, region_descriptions, write_vg_root

PINATA = "pi\u00f1ata"  # composed (NFC): one code point for the n with a tilde
PINATA_NFD = "pin\u0303ata"  # decomposed: n + combining tilde; looks the same, compares unequal
CAFE_NFD = "cafe\u0301"


def test_the_decomposed_and_composed_forms_differ_and_normalize_alike():
    assert PINATA_NFD != PINATA and unicodedata.normalize("NFD", PINATA) == PINATA_NFD
    assert nfc(PINATA_NFD) == PINATA and nfc("plain ascii") == "plain ascii"
    assert normalize_phrase(f"A {PINATA_NFD} at the {CAFE_NFD}") == normalize_phrase(f"a {PINATA} at the caf\u00e9") \
        == f"{PINATA} caf\u00e9"
    assert caption_words(f"A {PINATA_NFD}!") == ["a", PINATA]


# ----------------------------------------------------------------------------- an image listed twice


def test_an_image_listed_twice_in_a_karpathy_file_is_an_error_whatever_the_split(tmp_path):
    data = fx.karpathy_flickr()
    data["images"].append(copy.deepcopy(data["images"][0]))  # a train image, again at index 3
    path = fx.write_json(str(tmp_path / "dataset_flickr30k.json"), data)
    with pytest.raises(BadAnnotationError) as e:
        load_flickr30k_karpathy(path, "/f30k", "test")  # the test split is clean: the file is not
    assert str(e.value) == (f"{path}: images[3]: filename '1000092795.jpg' (split train) already listed at "
                            "images[0]: an image may be listed once")


def test_the_same_image_in_the_train_and_the_test_split_is_an_error(tmp_path):
    """Issue 29: a train/test leak, the case the check exists for (a check keyed on the split too
    would pass it)."""
    data = fx.karpathy_flickr()
    leak = copy.deepcopy(data["images"][0])  # the train image ...
    leak.update(split="test")  # ... listed again in test
    data["images"].append(leak)
    path = fx.write_json(str(tmp_path / "dataset_flickr30k.json"), data)
    for split in ("train", "test"):
        with pytest.raises(BadAnnotationError) as e:
            load_flickr30k_karpathy(path, "/f30k", split)
        assert str(e.value) == (f"{path}: images[3]: filename '1000092795.jpg' (split test) already listed at "
                                "images[0]: an image may be listed once")


def test_a_cocoid_listed_twice_in_a_karpathy_file_is_an_error(tmp_path):
    data = fx.karpathy_coco()
    twin = copy.deepcopy(data["images"][2])  # 318556, train
    twin.update(filename="COCO_train2014_copy.jpg", split="restval")
    data["images"].append(twin)
    path = fx.write_json(str(tmp_path / "dataset_coco.json"), data)
    with pytest.raises(BadAnnotationError) as e:
        load_coco_karpathy(path, "/coco", "train")
    assert str(e.value) == (f"{path}: images[4]: cocoid 318556 (split restval) already listed at images[2]: an "
                            "image may be listed once")


# ----------------------------------------------------------------------------- COCO's official caption files


def test_an_annotation_listed_twice_in_a_coco_captions_file_is_an_error(tmp_path):
    """It used to double one caption and push a real one out of the five kept, silently."""
    _, karpathy, (train_file, val_file) = fx.write_coco_root(str(tmp_path))
    data = fx.official_coco("val2014")
    data["annotations"].append(dict(data["annotations"][2]))  # id 603 of 391895, again at the end
    fx.write_json(val_file, data)
    n = len(data["annotations"]) - 1
    with pytest.raises(BadAnnotationError) as e:
        load_coco_karpathy(karpathy, "/coco", "test", captions_files=(train_file, val_file))
    assert str(e.value) == f"{val_file}: annotations[{n}] (id 603): annotation id 603 already at {val_file}: annotations[2] (id 603)"


def test_an_annotation_id_of_one_file_repeated_in_the_other_names_both_files(tmp_path):
    _, karpathy, (train_file, val_file) = fx.write_coco_root(str(tmp_path))
    data = fx.official_coco("val2014")
    data["annotations"][0]["id"] = 48  # the first annotation id of captions_train2014.json
    fx.write_json(val_file, data)
    with pytest.raises(BadAnnotationError) as e:
        load_coco_karpathy(karpathy, "/coco", "test", captions_files=(train_file, val_file))
    assert str(e.value) == f"{val_file}: annotations[0] (id 48): annotation id 48 already at {train_file}: annotations[0] (id 48)"


def test_an_annotation_id_equal_to_an_image_id_is_no_collision(tmp_path):
    """Issue 29: image ids and annotation ids are two namespaces in real COCO (they often share
    numbers); a file where they meet loads, every caption in place."""
    _, karpathy, (train_file, val_file) = fx.write_coco_root(str(tmp_path))
    data = fx.official_coco("val2014")
    image_id = data["images"][0]["id"]
    assert all(a["id"] != image_id for a in data["annotations"])
    data["annotations"][0]["id"] = image_id  # an annotation id that is also an image id
    fx.write_json(val_file, data)
    records = load_coco_karpathy(karpathy, "/coco", "test", captions_files=(train_file, val_file))
    loaded = {str(r["image_id"]): r for r in records}
    first = data["annotations"][0]
    record = loaded[str(first["image_id"])]
    assert str(image_id) in record["caption_ids"]
    assert record["captions"][record["caption_ids"].index(str(image_id))] == first["caption"].strip()


@pytest.mark.parametrize("how", ["same path", "symbolic link"])
def test_the_same_coco_captions_file_given_twice_is_an_error(tmp_path, how):
    _, karpathy, (_, val_file) = fx.write_coco_root(str(tmp_path))
    again = val_file
    if how == "symbolic link":
        again = str(tmp_path / "link.json")
        os.symlink(val_file, again)
    with pytest.raises(BadAnnotationError) as e:
        load_coco_karpathy(karpathy, "/coco", "test", captions_files=(val_file, again))
    assert str(e.value) == (f"{again}: COCO captions file given twice in {[val_file, again]} (entries 0 and 1): "
                            "every caption would be doubled")


def test_an_image_listed_twice_in_coco_captions_files_is_an_error(tmp_path):
    _, karpathy, (train_file, val_file) = fx.write_coco_root(str(tmp_path))
    data = fx.official_coco("val2014")
    data["images"].append(dict(data["images"][0], height=1))
    fx.write_json(val_file, data)
    n = len(data["images"]) - 1
    with pytest.raises(BadAnnotationError) as e:
        load_coco_karpathy(karpathy, "/coco", "test", captions_files=(train_file, val_file))
    assert str(e.value) == f"{val_file}: images[{n}] (id 391895): image id 391895 already at {val_file}: images[0] (id 391895)"


# ----------------------------------------------------------------------------- feature files


def test_a_nan_row_of_vsepp_precomputed_features_names_the_file_and_row(tmp_path):
    """It used to reach the model. Rows are checked when read (a 5 GB file is never scanned)."""
    _, ims = fx.write_precomp(str(tmp_path), rows=10)
    features = np.load(ims)
    features[5, 2] = np.nan  # image 1's row (one row per caption: row 5 * 1)
    np.save(ims, features)
    records = load_vsepp_precomp(str(tmp_path), "test")
    assert read_feature_row(ims, records[0]["feature_row"]).tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(BadAnnotationError) as e:
        read_feature_row(ims, records[1]["feature_row"])
    assert str(e.value) == f"{ims}: row 5: 1 of 4 feature values are not finite (first at column 2: nan)"


def test_an_infinite_row_of_an_image_features_file_names_the_file_and_row(tmp_path):
    features = np.ones((3, 2), np.float32)
    features[2] = [-np.inf, np.inf]
    path = write_image_features(str(tmp_path), "toy_split", features, ["a", "b", "c"])
    records = attach_image_features([{"image_id": i} for i in "abc"], "toy_split", str(tmp_path))
    assert read_feature_row(path, records[1]["feature_row"]).tolist() == [1.0, 1.0]
    with pytest.raises(BadAnnotationError) as e:
        read_feature_row(path, records[2]["feature_row"])
    assert str(e.value) == f"{path}: row 2: 2 of 2 feature values are not finite (first at column 0: -inf)"


# ----------------------------------------------------------------------------- decomposed Unicode


def _nfd(text):
    return unicodedata.normalize("NFD", text)


def test_flickr30k_entities_phrases_and_captions_in_nfd_are_read_as_nfc(tmp_path):
    captions = list(CAPTIONS)
    captions[3] = _nfd(f"[/EN#6/people A man] in [/EN#7/clothing a {PINATA} shirt] standing in [/EN#9/scene a garden] .")
    ann_root, image_root = write_flickr_root(str(tmp_path), captions=captions)
    (record,) = load_flickr30k_entities(ann_root, image_root, os.path.join(ann_root, "train.txt"))
    assert record["captions"][3] == f"A man in a {PINATA} shirt standing in a garden ."
    (ann,) = [a for a in record["annotations"] if a["chain_id"] == "7"]
    assert (ann["phrase"], ann["phrase_raw"]) == (f"{PINATA} shirt", f"a {PINATA} shirt")


def test_referit_phrases_in_nfd_are_read_as_nfc(tmp_path):
    refs = [{"ref_id": 7, "ann_id": 1, "image_id": 25123, "category_id": 3, "split": "train", "sent_ids": [70],
             "sentences": [{"sent_id": 70, "raw": _nfd(f"{PINATA} on the LEFT"), "sent": "x", "tokens": []}]}]
    refclef, image_root = _write_refclef(str(tmp_path), refs=refs)
    (record,) = load_referit(refclef, image_root, "train")
    (ann,) = record["annotations"]
    assert (ann["phrase"], ann["phrase_raw"], record["captions"]) == (f"{PINATA} left", f"{PINATA} on the LEFT",
                                                                     [f"{PINATA} on the LEFT"])


def test_visual_genome_phrases_in_nfd_are_read_as_nfc(tmp_path):
    regions = region_descriptions()
    regions[0]["regions"][0] = _region(51, 5, _nfd(f"A red {PINATA}."), 10, 20, 30, 40)
    paths = write_vg_root(str(tmp_path), regions=regions)
    records = load_visual_genome_pointing(*paths[:4])
    query = records[0]["queries"][0]
    assert (query["text"], query["phrase"]) == (f"A red {PINATA}.", f"red {PINATA}")


def test_captions_in_nfd_are_read_as_nfc_by_every_caption_reader(tmp_path):
    caption = f"A {PINATA} hangs in the caf\u00e9 ."
    lines = [_nfd(line.replace(fx.FLICKR_10002456[0], caption)) for line in fx.token_lines()]
    (record, _) = load_flickr30k_token_captions(fx.write_text(str(tmp_path / "results.token"), lines), "/f30k")
    assert record["captions"][0] == caption

    data = fx.karpathy_flickr()
    data["images"][1]["sentences"][0]["raw"] = _nfd(caption)
    (record,) = load_flickr30k_karpathy(fx.write_json(str(tmp_path / "dataset_flickr30k.json"), data), "/f30k", "test")
    assert record["captions"][0] == caption

    _, karpathy, (train_file, val_file) = fx.write_coco_root(str(tmp_path))
    data = fx.official_coco("val2014")
    data["annotations"][1]["caption"] = _nfd(caption)  # id 156, the first of 391895 by id
    with open(val_file, "w") as f:
        json.dump(data, f)  # ensure_ascii: the decomposed form is written as \u escapes
    (record,) = load_coco_karpathy(karpathy, "/coco", "test", captions_files=(train_file, val_file))
    assert record["captions"][0] == caption

    fx.write_precomp(str(tmp_path / "precomp"), captions=[_nfd(caption)] + fx.PRECOMP_CAPTIONS[1:])
    assert load_vsepp_precomp(str(tmp_path / "precomp"), "test")[0]["captions"][0] == caption


def test_the_evaluators_match_an_nfd_output_phrase_to_its_nfc_test_phrase():
    columns = PhraseColumns(["dog", _nfd(f"red {PINATA}")], {f"red {PINATA}": 0, "dog": 1})
    assert columns.targets.tolist() == [1, 0] and columns.num_unknown == 0
