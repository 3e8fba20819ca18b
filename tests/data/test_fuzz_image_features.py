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


def test_which_inputs_are_stored_and_a_record_without_its_row(tmp_path):
    from types import SimpleNamespace

    import torch

    from phrasedet.data.image_features import stored_image, stored_image_input

    def cfg(image_input):
        return SimpleNamespace(MODEL=SimpleNamespace(RETRIEVAL=SimpleNamespace(IMAGE_INPUT=image_input)))

    assert [stored_image_input(cfg(v)) for v in ("features", "maps", "pixels")] == [True, True, False]
    with pytest.raises(KeyError) as error:
        stored_image({"image_id": 7})
    assert error.value.args[0] == "image 7 has no precomputed feature (no 'feature_file' in its record)"
    (tmp_path / "s.npy").write_bytes(FEATURES)
    row = stored_image({"image_id": "b", "feature_file": str(tmp_path / "s.npy"), "feature_row": 1})
    assert row.dtype == torch.float32 and row.tolist() == [3.0, 4.0, 5.0]


def test_attaching_features_checks_rows_and_ids_against_the_split(tmp_path, monkeypatch):
    monkeypatch.setenv("PHRASEDET_DATASETS", str(tmp_path / "datasets"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as error:  # a relative folder, under neither root: the config key is named
        attach_image_features(RECORDS, "s", "feats")
    assert str(error.value) == (f"MODEL.RETRIEVAL.IMAGE_FEATURES_DIR 'feats': neither {str(tmp_path / 'datasets' / 'feats')!r} "
                                f"(under $PHRASEDET_DATASETS, currently {str(tmp_path / 'datasets')!r}) nor "
                                f"{str(tmp_path / 'feats')!r} (under the working directory) exists; docs/DATA.md")
    own = [{"image_id": "a", "feature_file": "x.npy", "feature_row": 4}]
    assert attach_image_features(own, "s", "") is own  # VSE++'s precomputed records carry their rows
    with pytest.raises(ValueError) as error:
        attach_image_features(RECORDS, "s", "")
    assert str(error.value) == ("s: MODEL.RETRIEVAL.IMAGE_INPUT 'features' needs MODEL.RETRIEVAL.IMAGE_FEATURES_DIR (or a "
                                "dataset whose records carry their features)")
    path, ids = str(tmp_path / "s.npy"), str(tmp_path / "s.txt")
    with pytest.raises(FileNotFoundError) as error:
        attach_image_features(RECORDS, "s", str(tmp_path))
    assert str(error.value) == f"image features {path!r} do not exist (tools/data/extract_image_features.py writes them)"
    np.save(tmp_path / "t.npy", np.zeros((3, 2), np.float32))
    with pytest.raises(BadAnnotationError) as error:
        attach_image_features(RECORDS, "t", str(tmp_path))
    assert str(error.value) == f"{tmp_path / 't.npy'}: 3 rows for the 2 images of t"
    (tmp_path / "s.npy").write_bytes(FEATURES)  # read once per process (cached): written before the first read
    for text, message in (("a\n", f"{ids}: 1 image ids for 2 images of the split"),
                          ("a\nc\n", f"{ids}:2: image id 'c', but row 1 of the split is image 'b': the features are not in "
                                     "the split's order")):
        (tmp_path / "s.txt").write_text(text)
        with pytest.raises(BadAnnotationError) as error:
            attach_image_features(RECORDS, "s", str(tmp_path))
        assert str(error.value) == message
    (tmp_path / "s.txt").write_text("\na\n\nb\n")  # blank lines ignored
    mixed = [RECORDS[0], {"image_id": "b", "feature_file": "x.npy", "feature_row": 9}]
    attached = attach_image_features(mixed, "s", str(tmp_path))
    assert attached == [{"image_id": "a", "feature_file": path, "feature_row": 0},
                        {"image_id": "b", "feature_file": path, "feature_row": 1}]
    assert mixed[0] == {"image_id": "a"}  # copies


def test_a_npz_archive_is_not_a_features_file(tmp_path):
    buffer = io.BytesIO()
    np.savez(buffer, features=np.zeros((2, 3)))
    (tmp_path / "s.npy").write_bytes(buffer.getvalue())
    with pytest.raises(BadAnnotationError) as error:
        feature_dim(str(tmp_path / "s.npy"))
    assert str(error.value) == f"{tmp_path / 's.npy'}: expected a .npy array, got a .npz archive"


def test_written_features_are_float32_unless_asked_with_their_ids_one_a_line(tmp_path):
    from phrasedet.data.image_features import write_image_features

    folder = str(tmp_path / "new" / "features")
    path = write_image_features(folder, "s", np.arange(6, dtype=np.float64).reshape(2, 3), ["a", 7])
    assert path == os.path.join(folder, "s.npy")
    assert np.load(path).dtype == np.float32 and feature_dim(path) == 3
    assert (tmp_path / "new" / "features" / "s.txt").read_bytes() == b"a\n7\n"
    path = write_image_features(folder, "s", np.ones((2, 4)), ["a", "b"], dtype=np.float16)  # the folder exists
    assert np.load(path).dtype == np.float16 and feature_dim(path) == 4  # the new file, not the cached one


def test_the_ids_file_is_utf8_whatever_the_locale(tmp_path):
    """A non-ASCII image id under an ASCII locale (LANG=C without Python's UTF-8 mode, as on some
    clusters) is written as UTF-8, as every reader reads it."""
    import subprocess
    import sys

    code = ("import numpy as np; from phrasedet.data.image_features import write_image_features; "
            f"write_image_features({str(tmp_path)!r}, 's', np.zeros((2, 1)), ['caf\\xe9', 'b'])")  # ASCII source
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    proc = subprocess.run([sys.executable, "-X", "utf8=0", "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "s.txt").read_bytes() == "café\nb\n".encode("utf-8")


def test_the_ids_file_is_utf8_under_an_ascii_locale_set_in_process(tmp_path):
    """The same in this process (LC_CTYPE set to C for the call), where the mutation tool sees the
    call: without Python's UTF-8 mode, ``open``'s default encoding then is ASCII and 'café' fails.
    Under UTF-8 mode the default is UTF-8 whatever the locale, and the subprocess test above decides."""
    import locale
    import sys

    from phrasedet.data.image_features import write_image_features

    if sys.flags.utf8_mode:
        pytest.skip("Python's UTF-8 mode is on: open()'s default is UTF-8 whatever the locale")
    old = locale.setlocale(locale.LC_CTYPE)
    try:
        locale.setlocale(locale.LC_CTYPE, "C")
        assert locale.getpreferredencoding(False).lower() in ("ansi_x3.4-1968", "ascii")  # the premise
        write_image_features(str(tmp_path), "s", np.zeros((2, 1)), ["caf\xe9", "b"])
    finally:
        locale.setlocale(locale.LC_CTYPE, old)
    assert (tmp_path / "s.txt").read_bytes() == "café\nb\n".encode("utf-8")
