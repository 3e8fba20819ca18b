"""Fuzz tests (tests/fuzz.py) of the ReferIt loader: a damaged ``refs(berkeley).p`` (bytes, or the
unpickled refs damaged structurally), ``instances.json`` or Hu et al. image list loads, or fails
with a BadFileError naming the file; plain tests pin the message of typical damages."""
import json
import os
import pickle

import pytest
from hypothesis import given

from phrasedet.data.datasets import BadAnnotationError, load_referit
from tests.fuzz import check_reader, damaged_bytes, damaged_json, fuzz_settings, write_file

REFS = [
    {"ref_id": 7, "ann_id": 1, "image_id": 25123, "split": "train",
     "sentences": [{"sent_id": 70, "raw": "Man on the LEFT", "sent": "man on the left"}, {"sent_id": 71, "raw": "guy"}]},
    {"ref_id": 8, "ann_id": 2, "image_id": 25124, "split": "train", "sentences": [{"sent_id": 80, "sent": "sky"}]},
]
INSTANCES = {
    "images": [{"id": 25123, "file_name": "25123.jpg", "width": 100, "height": 80},
               {"id": 25124, "file_name": "25124.jpg", "width": 60, "height": 40}],
    "annotations": [{"id": 1, "bbox": [10.5, 20.0, 30.0, 40.0]}, {"id": 2, "bbox": [0, 0, 60, 40]}],
}
IMAGE_LIST = b"25123\n25124\n99999\n"


def _pickle(obj):
    return pickle.dumps(obj, protocol=2)


def _refclef(tmp_path_factory, refs=None, instances=None):
    """A refclef folder with the given file contents (bytes; the valid ones by default)."""
    refs_path = write_file(tmp_path_factory, "refclef/refs(berkeley).p", _pickle(REFS) if refs is None else refs)
    refclef = os.path.dirname(refs_path)
    with open(os.path.join(refclef, "instances.json"), "wb") as f:
        f.write(json.dumps(INSTANCES).encode() if instances is None else instances)
    return refclef


def _load(refclef, **kw):
    return lambda: load_referit(refclef, os.path.join(refclef, "no_images"), "train", check_images=False, **kw)


@fuzz_settings
@given(data=damaged_bytes(_pickle(REFS)))
def test_refs_pickle_bytes(tmp_path_factory, data):
    refclef = _refclef(tmp_path_factory, refs=data)
    check_reader(_load(refclef), os.path.join(refclef, "refs(berkeley).p"))


@fuzz_settings
@given(data=damaged_json(REFS, dump=_pickle))
def test_refs_pickle_structure(tmp_path_factory, data):
    refclef = _refclef(tmp_path_factory, refs=data)
    check_reader(_load(refclef), os.path.join(refclef, "refs(berkeley).p"))


@fuzz_settings
@given(data=damaged_json(INSTANCES))
def test_instances_json(tmp_path_factory, data):
    refclef = _refclef(tmp_path_factory, instances=data)
    check_reader(_load(refclef), os.path.join(refclef, "instances.json"))


@fuzz_settings
@given(data=damaged_bytes(IMAGE_LIST))
def test_image_list(tmp_path_factory, data):
    refclef = _refclef(tmp_path_factory)
    path = os.path.join(refclef, "referit_test_imlist.txt")
    with open(path, "wb") as f:
        f.write(data)
    check_reader(_load(refclef, image_list=path), path)


def _write(tmp_path, refs=REFS, instances=INSTANCES):
    refclef = tmp_path / "refclef"
    refclef.mkdir()
    (refclef / "refs(berkeley).p").write_bytes(_pickle(refs))
    (refclef / "instances.json").write_text(json.dumps(instances))
    return str(refclef)


def test_ref_with_a_sentence_of_the_wrong_type(tmp_path):
    refs = [dict(REFS[0], sentences=[{"raw": 5}])]
    with pytest.raises(BadAnnotationError, match=r"refs\(berkeley\)\.p: record 0 \(ref_id 7\): sentences\[0\]: key "
                                                 r"'raw' must be a string, got 5$"):
        _load(_write(tmp_path, refs=refs))()


def test_ref_with_an_image_id_of_the_wrong_type(tmp_path):
    refs = [REFS[0], dict(REFS[1], image_id=[25124])]
    with pytest.raises(BadAnnotationError, match=r"refs\(berkeley\)\.p: record 1 \(ref_id 8\): key 'image_id' must be "
                                                 r"an integer, got \[25124\]$"):
        _load(_write(tmp_path, refs=refs))()


def test_refs_file_that_is_not_a_pickle(tmp_path):
    refclef = _write(tmp_path)
    (tmp_path / "refclef" / "refs(berkeley).p").write_bytes(b"not a pickle")
    with pytest.raises(BadAnnotationError, match=r"refs\(berkeley\)\.p: cannot unpickle: UnpicklingError: "):
        _load(refclef)()


def test_instances_annotation_with_a_box_of_the_wrong_type(tmp_path):
    instances = dict(INSTANCES, annotations=[INSTANCES["annotations"][0], {"id": 2, "bbox": [0, 0, "60", 40]}])
    with pytest.raises(BadAnnotationError, match=r"instances\.json: annotations\[1\] \(id 2\): key 'bbox' must be 4 "
                                                 r"finite numbers, got \[0, 0, '60', 40\]$"):
        _load(_write(tmp_path, instances=instances))()


def test_image_list_with_an_id_that_is_not_an_integer(tmp_path):
    refclef = _write(tmp_path)
    path = tmp_path / "referit_test_imlist.txt"
    path.write_text("25123\n25x24\n")
    with pytest.raises(BadAnnotationError, match=r"referit_test_imlist\.txt:2: image id '25x24' is not an integer$"):
        _load(refclef, image_list=str(path))()
