"""Fuzz tests (tests/fuzz.py) of the caption readers: Flickr30K's token file, the Flickr30K
Entities captions loader, Karpathy's split files, COCO's official caption files and VSE++'s
precomputed folder. A damaged file (one per test) loads, or fails with a BadFileError naming it;
one plain test per reader pins the message of a typical damage."""
import io
import os
import shutil

import numpy as np
import pytest
from hypothesis import given

from phrasedet.data.datasets import (
    BadAnnotationError,
    load_coco_karpathy,
    load_flickr30k_entities_captions,
    load_flickr30k_karpathy,
    load_flickr30k_token_captions,
    load_vsepp_precomp,
)
from tests.data import caption_fixtures as fx
from tests.data.flickr_fixture import CAPTIONS
from tests.fuzz import check_reader, damaged_bytes, damaged_json, fuzz_settings, write_file

TOKEN = "".join(line + "\n" for line in fx.token_lines()).encode()
SPLIT = b"10002456\n1000092795\n"
SENTENCES = ("\n".join(CAPTIONS) + "\n").encode()
UNRELATED = b"# format: <imageID> <sentence number>\n1000092795 5\n"
PRECOMP_CAPS = "".join(c + "\n" for c in fx.PRECOMP_CAPTIONS).encode()


def _npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


PRECOMP_IMS = _npy(np.arange(8, dtype=np.float32).reshape(2, 4))
# Small files for the structural damages (few keys, so that each is hit often): a test image and
# a train image of each Karpathy file, COCO's val image 554625 with two official captions.
KARPATHY_FLICKR = {"images": [
    {"filename": "1.jpg", "split": "test", "sentences": [{"raw": "A dog .", "sentid": 0}, {"raw": "A cat", "sentid": 1}]},
    {"filename": "2.jpg", "split": "train", "sentences": [{"raw": "A man .", "sentid": 2}]},
]}
KARPATHY_COCO = {"images": [
    {"filename": "COCO_val2014_000000554625.jpg", "filepath": "val2014", "cocoid": 554625, "split": "val",
     "sentences": [{"raw": "A boy .", "sentid": 7}, {"raw": "A cow .", "sentid": 8}]},
    {"filename": "COCO_val2014_000000000002.jpg", "filepath": "val2014", "cocoid": 2, "split": "train",
     "sentences": [{"raw": "A man .", "sentid": 9}]},
]}
OFFICIAL_VAL = {"images": [{"id": 554625, "height": 640, "width": 426}],
                "annotations": [{"image_id": 554625, "id": 13, "caption": "A boy ."},
                                {"image_id": 554625, "id": 2, "caption": "A cow ."}]}


def _copy_beside(src, damaged_path):
    """``src`` copied into the folder of ``damaged_path``; returns the copy's path."""
    dst = os.path.join(os.path.dirname(damaged_path), os.path.basename(src))
    shutil.copyfile(src, dst)
    return dst


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """Valid files the tests below pair with the damaged one."""
    root = str(tmp_path_factory.mktemp("valid"))
    coco, karpathy, official = fx.write_coco_root(root)
    small_karpathy = fx.write_json(os.path.join(root, "small", "dataset_coco.json"), KARPATHY_COCO)
    return {
        "split": fx.write_text(os.path.join(root, "test.txt"), SPLIT.decode().split()),
        "unrelated": fx.write_text(os.path.join(root, "UNRELATED_CAPTIONS"), UNRELATED.decode().splitlines()),
        "coco_karpathy": karpathy,
        "small_karpathy": small_karpathy,
        "coco_train": official[0],
        "precomp_caps": write_file(tmp_path_factory, "test_caps.txt", PRECOMP_CAPS),
        "precomp_ims": write_file(tmp_path_factory, "test_ims.npy", PRECOMP_IMS),
    }


# ---------------------------------------------------------------- Flickr30K token file


@fuzz_settings
@given(data=damaged_bytes(TOKEN))
def test_token_file(tmp_path_factory, valid, data):
    path = write_file(tmp_path_factory, "results_20130124.token", data)
    check_reader(lambda: load_flickr30k_token_captions(path, "/f30k", valid["split"]), path)


def test_token_file_line_without_caption_number(tmp_path):
    path = fx.write_text(str(tmp_path / "results_20130124.token"), fx.token_lines()[:2] + ["10002456.jpg\tA man ."])
    with pytest.raises(BadAnnotationError, match=r"results_20130124\.token:3: key '10002456\.jpg' is not "
                                                 r"'<image file>#<n>'$"):
        load_flickr30k_token_captions(path, "/f30k")


# ---------------------------------------------------------------- Flickr30K Entities captions


@fuzz_settings
@given(data=damaged_bytes(SENTENCES))
def test_entities_sentences_file(tmp_path_factory, valid, data):
    path = write_file(tmp_path_factory, "Sentences/1000092795.txt", data)
    root = os.path.dirname(os.path.dirname(path))
    split = fx.write_text(os.path.join(root, "one.txt"), ["1000092795"])
    check_reader(lambda: load_flickr30k_entities_captions(root, "/f30k", split, valid["unrelated"]), path)


def test_entities_sentences_file_with_fewer_captions_than_unrelated_lists(tmp_path, valid):
    sentences = fx.write_text(str(tmp_path / "Sentences" / "1000092795.txt"), CAPTIONS[:3])
    split = fx.write_text(str(tmp_path / "one.txt"), ["1000092795"])
    with pytest.raises(BadAnnotationError, match=rf"UNRELATED_CAPTIONS: image 1000092795 sentence 5 but "
                                                 rf"{sentences} has 3 captions$"):
        load_flickr30k_entities_captions(str(tmp_path), "/f30k", split, valid["unrelated"])


# ---------------------------------------------------------------- Karpathy's split files


@fuzz_settings
@given(data=damaged_json(KARPATHY_FLICKR))
def test_karpathy_flickr(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "dataset_flickr30k.json", data)
    check_reader(lambda: load_flickr30k_karpathy(path, "/f30k", "test"), path)


def test_karpathy_filename_not_a_string(tmp_path):
    data = fx.karpathy_flickr()
    data["images"][1]["filename"] = None
    path = fx.write_json(str(tmp_path / "dataset_flickr30k.json"), data)
    with pytest.raises(BadAnnotationError, match=r"dataset_flickr30k\.json: images\[1\]: key 'filename' must be a "
                                                 r"string, got None$"):
        load_flickr30k_karpathy(path, "/f30k", "test")


@fuzz_settings
@given(data=damaged_json(KARPATHY_COCO))
def test_karpathy_coco(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "dataset_coco.json", data)
    check_reader(lambda: load_coco_karpathy(path, "/coco", "val"), path)


def test_karpathy_coco_filepath_not_a_string(tmp_path):
    data = fx.karpathy_coco()
    data["images"][0]["filepath"] = ["val2014"]
    path = fx.write_json(str(tmp_path / "dataset_coco.json"), data)
    with pytest.raises(BadAnnotationError, match=r"dataset_coco\.json: images\[0\]: key 'filepath' must be a "
                                                 r"string, got \['val2014'\]$"):
        load_coco_karpathy(path, "/coco", "test")


# ---------------------------------------------------------------- COCO's official caption files


@fuzz_settings
@given(data=damaged_json(OFFICIAL_VAL))
def test_coco_official_captions(tmp_path_factory, valid, data):
    path = write_file(tmp_path_factory, "captions_val2014.json", data)
    check_reader(lambda: load_coco_karpathy(valid["small_karpathy"], "/coco", "val", captions_files=(path,)), path)


def test_coco_official_image_id_not_an_integer(tmp_path, valid):
    data = fx.official_coco("val2014")
    data["annotations"][2]["image_id"] = [391895]
    path = fx.write_json(str(tmp_path / "captions_val2014.json"), data)
    with pytest.raises(BadAnnotationError, match=r"captions_val2014\.json: annotations\[2\] \(id 603\): key "
                                                 r"'image_id' must be an integer, got \[391895\]$"):
        load_coco_karpathy(valid["coco_karpathy"], "/coco", "val", captions_files=(valid["coco_train"], path))


# ---------------------------------------------------------------- VSE++ precomputed folder


@fuzz_settings
@given(data=damaged_bytes(PRECOMP_CAPS))
def test_vsepp_captions(tmp_path_factory, valid, data):
    path = write_file(tmp_path_factory, "test_caps.txt", data)
    _copy_beside(valid["precomp_ims"], path)
    check_reader(lambda: load_vsepp_precomp(os.path.dirname(path), "test"), path)


@fuzz_settings
@given(data=damaged_bytes(PRECOMP_IMS))
def test_vsepp_features(tmp_path_factory, valid, data):
    path = write_file(tmp_path_factory, "test_ims.npy", data)
    _copy_beside(valid["precomp_caps"], path)
    check_reader(lambda: load_vsepp_precomp(os.path.dirname(path), "test"), path)


def test_vsepp_features_of_a_scalar(tmp_path):
    fx.write_precomp(str(tmp_path))
    np.save(tmp_path / "test_ims.npy", np.float32(1))
    with pytest.raises(BadAnnotationError, match=r"test_ims\.npy: expected an array with a row per image or per "
                                                 r"caption, got shape \(\)$"):
        load_vsepp_precomp(str(tmp_path), "test")
