"""Fuzz tests (tests/fuzz.py) of the precomputed image-feature reader: a damaged features ``.npy``
or ids ``.txt`` attaches, or fails with a BadFileError naming it; plain tests pin typical messages."""
import io
import os
import re

import numpy as np
import pytest
from hypothesis import given

from phrasedet.data import attach_image_features
from phrasedet.data.datasets import BadAnnotationError
from phrasedet.data.image_features import feature_dim, read_feature_row
from tests.fuzz import check_reader, damaged_bytes, fuzz_settings, write_file

RECORDS = [{"image_id": "a"}, {"image_id": "b"}]
IDS = b"a\nb\n"


def _npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


FEATURES = _npy(np.arange(6, dtype=np.float32).reshape(2, 3))


def _attach_and_read(features_dir):
    """Attach the features of split ``s`` and read every row, as training does."""
    records = attach_image_features(RECORDS, "s", features_dir)
    return [read_feature_row(r["feature_file"], r["feature_row"]) for r in records]


@fuzz_settings
@given(data=damaged_bytes(FEATURES))
def test_features_npy(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "s.npy", data)
    check_reader(lambda: _attach_and_read(os.path.dirname(path)), path)


@fuzz_settings
@given(data=damaged_bytes(IDS))
def test_ids_txt(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "s.txt", data)
    with open(path[: -len(".txt")] + ".npy", "wb") as f:
        f.write(FEATURES)
    check_reader(lambda: _attach_and_read(os.path.dirname(path)), path)


def test_features_of_strings(tmp_path):
    np.save(tmp_path / "s.npy", np.array([["x", "y"], ["z", "w"]]))
    with pytest.raises(BadAnnotationError, match=r"s\.npy: expected a \[images, dims\] or \[images, C, h, w\] array of "
                                                 r"numbers, got shape \(2, 2\), dtype <U1$"):
        feature_dim(str(tmp_path / "s.npy"))


@pytest.mark.parametrize("shape", [(2,), (2, 3, 4), (2, 1, 1, 1, 1)])
def test_features_of_another_rank(tmp_path, shape):
    np.save(tmp_path / "s.npy", np.zeros(shape, np.float32))
    with pytest.raises(BadAnnotationError, match=rf"s\.npy: expected a \[images, dims\] or \[images, C, h, w\] array of "
                                                 rf"numbers, got shape {re.escape(str(shape))}, dtype float32$"):
        feature_dim(str(tmp_path / "s.npy"))


def test_maps_are_read_a_row_at_a_time_in_their_shape(tmp_path):
    maps = np.arange(2 * 3 * 2 * 2, dtype=np.uint8).reshape(2, 3, 2, 2)
    np.save(tmp_path / "s.npy", maps)
    assert feature_dim(str(tmp_path / "s.npy")) == 3
    row = read_feature_row(str(tmp_path / "s.npy"), 1)
    assert row.dtype == np.float32 and row.shape == (3, 2, 2) and (row == maps[1]).all()


def test_features_file_that_is_truncated(tmp_path):
    (tmp_path / "s.npy").write_bytes(FEATURES[:-5])
    with pytest.raises(BadAnnotationError, match=r"s\.npy: not a readable numpy file \(ValueError: "):
        attach_image_features(RECORDS, "s", str(tmp_path))


def test_ids_file_with_an_undecodable_byte(tmp_path):
    (tmp_path / "s.npy").write_bytes(FEATURES)
    (tmp_path / "s.txt").write_bytes(b"a\n\xffb\n")
    with pytest.raises(BadAnnotationError, match=r"s\.txt:2:1: byte 0xff \(byte offset 2\) is not valid UTF-8$"):
        attach_image_features(RECORDS, "s", str(tmp_path))


def test_a_file_that_is_not_numpy_is_named_as_such_not_as_a_pickle(tmp_path):
    from phrasedet.fileio import load_array_file

    path = tmp_path / "feats.npy"
    path.write_bytes(b"hello world")
    with pytest.raises(BadAnnotationError, match=r"feats.npy: not a numpy file \(a .npy starts with .*this one starts with b'hello '\)"):
        load_array_file(str(path))
