"""Fuzz tests (tests/fuzz.py) of the evaluators' file readers: damaged saved embeddings, score
matrices, points, heatmaps, pointing predictions, phrase-predictions files and phrase filters
load, or fail with a BadFileError naming the file."""
import io
import json
import os
import tempfile

import numpy as np
import pytest
from hypothesis import given

from phrasedet.evaluation.phrase_detection.phrase_filter import PhraseFilter
from phrasedet.evaluation.phrase_detection.predictions import PredictionWriter, load_predictions
from phrasedet.evaluation.pointing.dataset import PointingGroundTruth
from phrasedet.evaluation.pointing.files import (load_heatmaps, load_pointing_predictions, load_points,
                                                 save_heatmaps, save_pointing_predictions, save_points)
from phrasedet.evaluation.pointing.hit_rules import rule_keys
from phrasedet.evaluation.pointing.metrics import PointingProtocol
from phrasedet.evaluation.retrieval.files import ScoresWriter, load_embeddings, load_scores, save_embeddings
from phrasedet.fileio import BadFileError
from tests.fuzz import check_reader, damaged_bytes, damaged_json, fuzz_settings, write_file
from tests.fuzz_npz import damaged_npz

from .retrieval_toy import load_tool
from .toy import A, B, build


def _written(write, name: str) -> bytes:
    """The bytes ``write(path)`` puts in a new file called ``name``."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, name)
        write(path)
        with open(path, "rb") as f:
            return f.read()


def _arrays(data: bytes) -> dict:
    """The arrays of a .npz file's bytes."""
    with np.load(io.BytesIO(data)) as npz:
        return {k: npz[k] for k in npz.files}


def _savez(folder, name: str, arrays: dict) -> str:
    """``arrays`` saved as ``folder/name``; returns the path."""
    path = str(folder / name)
    np.savez(path, **arrays)
    return path


# ----------------------------------------------------------------------------- retrieval
IMAGE_IDS = ["img0", "img1", "img2"]
C2I = np.array([0, 0, 1, 2, 2], np.int64)
RNG = np.random.default_rng(0)
IMAGES, CAPTIONS = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((5, 4)).astype(np.float32)
EMBEDDINGS = _written(lambda p: save_embeddings(p, IMAGE_IDS, IMAGES, CAPTIONS, C2I), "embeddings.npz")


def _write_scores(path):
    scores = IMAGES @ CAPTIONS.T
    with ScoresWriter(path, IMAGE_IDS, C2I, scores[C2I, np.arange(5)]) as writer:
        writer.write(0, scores[:2])
        writer.write(2, scores[2:])


SCORES = _written(_write_scores, "scores.npz")


def _check_embeddings(out):
    if isinstance(out, dict):
        assert np.isfinite(out["images"]).all() and np.isfinite(out["captions"]).all()
        assert len(out["image_ids"]) == len(out["images"]) and len(out["caption_to_image"]) == len(out["captions"])


@fuzz_settings
@given(data=damaged_npz(_arrays(EMBEDDINGS)) | damaged_bytes(EMBEDDINGS))
def test_embeddings(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "retrieval_embeddings.npz", data)
    _check_embeddings(check_reader(lambda: load_embeddings(path), path))


def test_embeddings_messages(tmp_path):
    """Each key's error in full; +inf is refused as NaN is; embeddings come back float32."""
    arrays = _arrays(EMBEDDINGS)
    infinite = IMAGES.copy()
    infinite[2, 1] = np.inf
    for name, changes, message in (
            ("nan", {"captions": np.where(np.eye(5, 4) > 0, np.nan, CAPTIONS)},
             "key 'captions': row 0: values must be finite numbers (4 such rows)"),
            ("inf", {"captions": np.where(np.eye(5, 4) > 0, -np.inf, CAPTIONS)[::-1]},
             "key 'captions': row 1: values must be finite numbers (4 such rows)"),
            ("image_inf", {"images": infinite}, "key 'images': row 2 ('img2'): values must be finite numbers (1 such rows)"),
            ("complex", {"images": IMAGES.astype(np.complex64)},
             "key 'images': expected a 2-D array of kind 'f', got dtype complex64 and shape (3, 4)"),
            ("caption_int", {"captions": np.ones((5, 4), np.int64)},
             "key 'captions': expected a 2-D array of kind 'f', got dtype int64 and shape (5, 4)"),
            ("ids_int", {"image_ids": np.arange(3)},
             "key 'image_ids': expected a 1-D array of kind 'U', got dtype int64 and shape (3,)"),
            ("c2i_float", {"caption_to_image": C2I.astype(np.float64)},
             "key 'caption_to_image': expected a 1-D array of kind 'iu', got dtype float64 and shape (5,)")):
        path = _savez(tmp_path, f"{name}.npz", {**arrays, **changes})
        _raises_exactly(lambda: load_embeddings(path), f"{path}: {message}")
    for dtype in (np.float32, np.float64, np.float16):
        path = _savez(tmp_path, "f.npz", {**arrays, "images": IMAGES.astype(dtype), "captions": CAPTIONS.astype(dtype)})
        out = load_embeddings(path)
        assert (out["images"].dtype, out["captions"].dtype) == (np.float32, np.float32), dtype
        assert np.array_equal(out["images"], IMAGES.astype(dtype).astype(np.float32))
    truncated = tmp_path / "t.npz"
    truncated.write_bytes(EMBEDDINGS[:-30])
    with pytest.raises(BadFileError, match=rf"^{truncated}: not a readable numpy file \(BadZipFile"):
        load_embeddings(str(truncated))


@fuzz_settings
@given(data=damaged_npz(_arrays(SCORES)) | damaged_bytes(SCORES))
def test_scores(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "retrieval_scores.npz", data)
    out = check_reader(lambda: load_scores(path), path)
    if isinstance(out, dict):
        assert out["scores"].ndim == 2


@fuzz_settings
@given(data=damaged_bytes(_written(lambda p: np.save(p, IMAGES @ CAPTIONS.T), "scores.npy")))
def test_bare_score_matrix(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "scores.npy", data)
    check_reader(lambda: load_scores(path), path)


def test_scores_messages(tmp_path):
    path = tmp_path / "scores.npz"
    data = bytearray(SCORES)
    start = SCORES.index(b"gt_scores.npy") + 13 + 20 + 128  # inside the member's array data
    data[start] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(BadFileError,
                       match=rf"^{path}: key 'gt_scores': cannot read the array \(BadZipFile: Bad CRC-32"):
        load_scores(str(path))
    path = _savez(tmp_path, "s.npz", {**_arrays(SCORES), "scores": np.zeros((3, 5), np.int64)})
    with pytest.raises(BadFileError,
                       match=rf"^{path}: key 'scores': expected a 2-D array of kind 'f', got dtype int64"):
        load_scores(path)


C2I_FILE = _written(lambda p: np.save(p, C2I), "c2i.npy")


@pytest.fixture(scope="module")
def tool():
    return load_tool("evaluate_retrieval")


@fuzz_settings
@given(data=damaged_bytes(C2I_FILE))
def test_caption_to_image_file_of_the_tool(tool, tmp_path_factory, data):
    path = write_file(tmp_path_factory, "c2i.npy", data)
    check_reader(lambda: tool._from_npy("scores.npy", {}, path, len(IMAGE_IDS), len(C2I)), path)


def test_caption_to_image_file_messages(tool, tmp_path):
    path = tmp_path / "c2i.npy"
    path.write_bytes(C2I_FILE[:-3])
    with pytest.raises(BadFileError, match=rf"^{path}: not a readable numpy file \(ValueError: "):
        tool._from_npy("scores.npy", {}, str(path), 3, 5)
    np.save(path, C2I.astype(np.float32))
    with pytest.raises(BadFileError, match=rf"^{path}: caption_to_image must be a 1-D integer array, got dtype float32 "
                                           r"and shape \(5,\) \(for scores.npy: 3 images x 5 captions\)$"):
        tool._from_npy("scores.npy", {}, str(path), 3, 5)


# ----------------------------------------------------------------------------- pointing
QUERY_IDS = ["q0", "q1", "q2"]
POINTS = np.array([[10.0, 20.0], [np.nan, np.nan], [5.5, 3.0]])
POINTS_FILE = _written(lambda p: save_points(p, QUERY_IDS, POINTS), "points.npz")
HEATMAPS_FILE = _written(lambda p: save_heatmaps(p, QUERY_IDS, np.arange(36, dtype=np.float32).reshape(3, 3, 4),
                                                 "centre"), "heatmaps.npz")


def _write_predictions(path):
    gt = PointingGroundTruth("toy", ["img0", "img1"], [[100, 200], [40, 80]], QUERY_IDS, ["a", "b", "c"],
                             [[0, 0, 50, 50], [10, 10, 20, 20], [0, 0, 80, 40]], [2, 1])
    protocol = PointingProtocol("tolerance", 15.0)
    hits = {k: np.array([True, False, True]) for k in rule_keys(protocol.tolerance)}
    save_pointing_predictions(path, gt, POINTS, hits, protocol)


POINTING_PREDICTIONS = _written(_write_predictions, "pointing_predictions.npz")


@fuzz_settings
@given(data=damaged_npz(_arrays(POINTS_FILE)) | damaged_bytes(POINTS_FILE))
def test_points(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "points.npz", data)
    out = check_reader(lambda: load_points(path), path)
    if isinstance(out, tuple):
        assert out[1].shape == (len(out[0]), 2) and not np.isinf(out[1]).any()


@fuzz_settings
@given(data=damaged_npz(_arrays(HEATMAPS_FILE)) | damaged_bytes(HEATMAPS_FILE))
def test_heatmaps(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "heatmaps.npz", data)
    out = check_reader(lambda: load_heatmaps(path), path)
    if isinstance(out, tuple):
        assert out[1].ndim == 3 and len(out[1]) == len(out[0]) and not np.isnan(out[1]).any()


@fuzz_settings
@given(data=damaged_npz(_arrays(POINTING_PREDICTIONS)) | damaged_bytes(POINTING_PREDICTIONS))
def test_pointing_predictions(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "pointing_predictions.npz", data)
    check_reader(lambda: load_pointing_predictions(path), path)


def test_pointing_messages(tmp_path):
    path = _savez(tmp_path, "p.npz", {**_arrays(POINTS_FILE), "points": np.where(POINTS > 6, np.inf, POINTS)})
    with pytest.raises(BadFileError, match=rf"^{path}: key 'points': row 0 \('q0'\): values must be finite numbers "
                                           r"or NaN \(1 such rows\)$"):
        load_points(path)
    maps = _arrays(HEATMAPS_FILE)
    maps["heatmaps"][1, 2, 0] = np.nan
    path = _savez(tmp_path, "h.npz", maps)
    with pytest.raises(BadFileError,
                       match=rf"^{path}: key 'heatmaps': row 1 \('q1'\): values must be numbers, not NaN"):
        load_heatmaps(path)
    path = _savez(tmp_path, "pp.npz", {**_arrays(POINTING_PREDICTIONS), "tolerance": np.asarray(-1.0)})
    with pytest.raises(BadFileError, match=rf"^{path}: keys 'hit_rule' and 'tolerance': tolerance must be a finite"):
        load_pointing_predictions(path)



def _raises_exactly(read, message, error=BadFileError):
    with pytest.raises(error) as e:
        read()
    assert str(e.value) == message


def test_pointing_files_of_the_wrong_form_name_the_file_and_what_it_must_hold(tmp_path):
    """A single array, a missing file, and each key's length, shape and kind checked in turn
    (every reader of the pointing tool, messages in full)."""
    np.save(tmp_path / "one.npy", POINTS)
    single = str(tmp_path / "one.npy")
    for read, what, keys in ((load_points, "a points file", "query_id, points"),
                             (load_heatmaps, "a heatmaps file", "query_id, heatmaps[, point_mode]"),
                             (load_pointing_predictions, "a pointing predictions file",
                              "query_id, image_id, points, boxes, hit_<rule>, hit_rule, tolerance")):
        _raises_exactly(lambda: read(single), f"{single}: {what} must be a .npz with keys {keys}; got a single array "
                                              "of shape (3, 2)")
        missing = str(tmp_path / "none.npz")
        _raises_exactly(lambda: read(missing), f"{what} {missing!r} does not exist", FileNotFoundError)
    predictions = _arrays(POINTING_PREDICTIONS)
    for name, changes, message in (
            ("points_1d", {"points": np.zeros(6)}, "key 'points': expected a 2-D array of kind 'fiu', got dtype float64 "
                                                   "and shape (6,)"),
            ("points_3", {"points": np.zeros((3, 3))}, "key 'points': expected shape [queries, 2] as (x, y), got (3, 3)"),
            ("points_len", {"points": np.zeros((2, 2))}, "key 'points': has 2 entries, but there are 3 entries in "
                                                         "'query_id'"),
            ("image_len", {"image_id": np.array(["img0"])}, "key 'image_id': has 1 entries, but there are 3 entries in "
                                                           "'query_id'"),
            ("boxes_3", {"boxes": np.zeros((3, 3))}, "key 'boxes': expected shape [queries, 4] as [x1, y1, x2, y2], got "
                                                     "(3, 3)"),
            ("boxes_len", {"boxes": np.zeros((4, 4))}, "key 'boxes': has 4 entries, but there are 3 entries in 'query_id'"),
            ("boxes_inf", {"boxes": np.array([[0, 0, 5, 5], [0, 0, np.inf, 5], [0, 0, 5, np.nan]])},
             "key 'boxes': row 1 ('q1'): values must be finite numbers (2 such rows)"),
            ("hits_len", {"hit_tol15": np.ones(2, bool)}, "key 'hit_tol15': has 2 entries, but there are 3 entries in "
                                                          "'query_id'"),
            ("tolerance_1d", {"tolerance": np.array([15.0])}, "key 'tolerance': expected a single value of kind 'f', got "
                                                              "dtype float64 and shape (1,)"),
            ("rule_int", {"hit_rule": np.asarray(3)}, "key 'hit_rule': expected a single value of kind 'U', got dtype "
                                                      "int64 and shape ()"),
            ("query_float", {"query_id": np.arange(3.0)}, "key 'query_id': expected a 1-D array of kind 'Uiu', got "
                                                          "dtype float64 and shape (3,)"),
            ("image_int", {"image_id": np.arange(3)}, "key 'image_id': expected a 1-D array of kind 'U', got dtype "
                                                      "int64 and shape (3,)"),
            ("boxes_str", {"boxes": np.full((3, 4), "0")}, "key 'boxes': expected a 2-D array of kind 'f', got dtype <U1 "
                                                           "and shape (3, 4)"),
            ("hits_float", {"hit_strict": np.ones(3)}, "key 'hit_strict': expected a 1-D array of kind 'b', got dtype "
                                                       "float64 and shape (3,)")):
        path = _savez(tmp_path, f"{name}.npz", {**predictions, **changes})
        _raises_exactly(lambda: load_pointing_predictions(path), f"{path}: {message}")
    maps = _arrays(HEATMAPS_FILE)
    for name, changes, message in (
            ("empty_w", {"heatmaps": np.zeros((3, 4, 0), np.float32)}, "key 'heatmaps': empty maps of size (4, 0)"),
            ("empty_h", {"heatmaps": np.zeros((3, 0, 4), np.float32)}, "key 'heatmaps': empty maps of size (0, 4)"),
            ("mode", {"point_mode": np.asarray("peak")}, "key 'point_mode': must be one of ('corner', 'centre', "
                                                          "'upsampled'), got 'peak'"),
            ("mode_int", {"point_mode": np.asarray(1)}, "key 'point_mode': expected a single value of kind 'U', got "
                                                        "dtype int64 and shape ()"),
            ("maps_int", {"heatmaps": np.ones((3, 3, 4), np.int64)}, "key 'heatmaps': expected a 3-D array of kind "
                                                                     "'f', got dtype int64 and shape (3, 3, 4)")):
        path = _savez(tmp_path, f"{name}.npz", {**maps, **changes})
        _raises_exactly(lambda: load_heatmaps(path), f"{path}: {message}")


def test_pointing_files_read_back_with_their_documented_types(tmp_path):
    """Integer query ids read as their decimal strings; float32 points and integer hits are
    written as float64 and bool; a heatmaps file without ``point_mode`` gives None."""
    gt = PointingGroundTruth("toy", ["img0", "img1"], [[100, 200], [40, 80]], [7, 8, 9], ["a", "b", "c"],
                             [[0, 0, 50, 50], [10, 10, 20, 20], [0, 0, 80, 40]], [2, 1])
    path = str(tmp_path / "p.npz")
    save_pointing_predictions(path, gt, POINTS.astype(np.float32), {k: [1, 0, 1] for k in rule_keys(15.0)},
                              PointingProtocol("tolerance", 15))
    with np.load(path) as npz:
        assert (npz["points"].dtype, npz["tolerance"].dtype, npz["hit_tol15"].dtype) == (np.float64, np.float64, bool)
    read = load_pointing_predictions(path)
    assert read["query_id"] == ["7", "8", "9"] and read["image_id"] == ["img0", "img0", "img1"]
    assert read["hits"]["tol15"].tolist() == [True, False, True] and read["protocol"] == PointingProtocol("tolerance", 15.0)
    third = np.float32(1 / 3)  # a file written elsewhere with float32 boxes: read as float64, exactly
    with open(path, "rb") as f:
        path32 = _savez(tmp_path, "boxes32.npz", {**_arrays(f.read()), "boxes": np.full((3, 4), third, np.float32)})
    boxes = load_pointing_predictions(path32)["boxes"]
    assert boxes.dtype == np.float64 and boxes[0, 0] == float(third)
    np.savez(path, query_id=np.array([3, 1], np.int64), points=np.array([[1, 2], [3, 4]], np.int32))
    ids, points = load_points(path)
    assert ids == ["3", "1"] and points.dtype == np.float64 and points.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    save_heatmaps(path, ["q0"], np.ones((1, 2, 2), np.float32))
    assert load_heatmaps(path)[2] is None
    save_heatmaps(path, ["q0"], np.ones((1, 2, 2), np.float32), "upsampled")
    assert load_heatmaps(path)[2] == "upsampled"


def test_score_files_hold_only_what_they_have_and_refuse_integer_matrices(tmp_path):
    path = _savez(tmp_path, "only.npz", {"scores": np.ones((2, 3), np.float32)})
    out = load_scores(path)
    assert list(out) == ["scores"] and out["scores"].tolist() == [[1.0] * 3] * 2
    for name, extra, message in (
            ("ids_len", {"image_ids": np.array(["a"])}, "key 'image_ids': has 1 entries, but there are 2 rows in 'scores'"),
            ("ids_int", {"image_ids": np.arange(2)}, "key 'image_ids': expected a 1-D array of kind 'U', got dtype int64 "
                                                     "and shape (2,)"),
            ("gt_int", {"gt_scores": np.arange(3)}, "key 'gt_scores': expected a 1-D array of kind 'f', got dtype int64 "
                                                    "and shape (3,)")):
        bad = _savez(tmp_path, f"{name}.npz", {"scores": np.ones((2, 3), np.float32), **extra})
        _raises_exactly(lambda: load_scores(bad), f"{bad}: {message}")
    np.save(tmp_path / "bare.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    bare = load_scores(str(tmp_path / "bare.npy"))["scores"]  # memory-mapped: never read whole
    assert isinstance(bare, np.memmap) and bare.mode == "r" and bare.tolist() == [[0, 1, 2], [3, 4, 5]]
    np.save(tmp_path / "ints.npy", np.ones((2, 3), np.int64))
    path = str(tmp_path / "ints.npy")
    _raises_exactly(lambda: load_scores(path), f"{path}: a score matrix must be a 2-D float array [images, captions], got "
                                               "dtype int64 and shape (2, 3)")
    missing = str(tmp_path / "none.npy")
    _raises_exactly(lambda: load_scores(missing), f"score matrix file {missing!r} does not exist", FileNotFoundError)
    np.save(tmp_path / "e.npy", IMAGES)
    path = str(tmp_path / "e.npy")
    _raises_exactly(lambda: load_embeddings(path), f"{path}: an embeddings file must be a .npz with keys image_ids, images, "
                                                   "captions, caption_to_image; got a single array of shape (3, 4)")
    missing = str(tmp_path / "none.npz")
    _raises_exactly(lambda: load_embeddings(missing), f"an embeddings file {missing!r} does not exist", FileNotFoundError)


def test_ids_are_saved_as_strings_even_when_there_are_none(tmp_path):
    """``query_id`` / ``image_ids`` are str [Q] in every written file (an empty list would
    otherwise be saved as float64)."""
    writers = {"query_id": (lambda p: save_points(p, [], np.zeros((0, 2))),
                            lambda p: save_heatmaps(p, [], np.zeros((0, 2, 2), np.float32))),
               "image_ids": (lambda p: save_embeddings(p, [], np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0, np.int64)),
                             lambda p: ScoresWriter(p, [], np.zeros(0, np.int64), np.zeros(0)).close())}
    for key, write_each in writers.items():
        for n, write in enumerate(write_each):
            path = str(tmp_path / f"{key}{n}.npz")
            write(path)
            with np.load(path) as npz:
                assert (npz[key].dtype.kind, npz[key].shape) == ("U", (0,)), (key, n)
    save_points(str(tmp_path / "p.npz"), [7, "8"], np.ones((2, 2)))
    with np.load(str(tmp_path / "p.npz")) as npz:
        assert npz["query_id"].tolist() == ["7", "8"]


def test_scores_writer_after_close_and_with_an_empty_block(tmp_path):
    """An error raised after the file was completed leaves it in place; an empty matrix given
    its empty block is the same file as one given none."""
    path = str(tmp_path / "s.npz")
    with pytest.raises(RuntimeError, match="^later$"):
        with ScoresWriter(path, ["a"], np.array([0]), np.ones(1)) as writer:
            writer.write(0, np.full((1, 1), 2.0, np.float32))
            writer.close()
            raise RuntimeError("later")
    assert load_scores(path)["scores"].tolist() == [[2.0]]
    with ScoresWriter(path, [], np.zeros(0, np.int64), np.zeros(0)) as writer:
        writer.write(0, np.zeros((0, 0), np.float32))
    with np.load(path) as npz:
        assert npz["scores"].shape == (0, 0) and npz["scores"].dtype == np.float32
    writer = ScoresWriter(path, ["a"], np.array([0]), np.ones(1))  # scoring failed before the first block
    _raises_exactly(writer.close, f"{path}: only 0 of 1 rows were written; file deleted", ValueError)
    assert not os.path.exists(path)


# ----------------------------------------------------------------------------- phrase detection
GT, _ = build(["1000", "1001"], [("1000", "man", A), ("1001", "dog", B)], {})


def _write_phrase_predictions(path):
    with PredictionWriter(path) as writer:
        writer.write("1000", ["man", "dog"], [[0.5, 0.25], [0.75, np.nan]], [[A, B], [B, A]])
        writer.write("1001", ["dog"], [[-np.inf, 0.5]], [[A, B]])


PREDICTIONS = _written(_write_phrase_predictions, "p.jsonl")
RECORDS = [json.loads(line) for line in PREDICTIONS.decode().splitlines()]


def _jsonl(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


@fuzz_settings
@given(data=damaged_json(RECORDS, dump=_jsonl))
def test_phrase_predictions_jsonl(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "phrase_predictions.jsonl", data)
    check_reader(lambda: load_predictions(path, GT), path)


@fuzz_settings
@given(data=damaged_json(RECORDS))
def test_phrase_predictions_json_list(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "phrase_predictions.json", data)
    check_reader(lambda: load_predictions(path, GT), path)


def test_phrase_predictions_messages(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(PREDICTIONS.replace(b'"man"', b'"m\xe4n"'))
    with pytest.raises(BadFileError, match=rf"^{path}:1:34: byte 0xe4 \(byte offset 33\) is not valid UTF-8$"):
        load_predictions(str(path), GT)
    path.write_bytes(b"\xef\xbb\xbf" + PREDICTIONS)
    assert load_predictions(str(path), GT).k == 2
    path.write_bytes(PREDICTIONS + b'{"image_id": "1000", \n')
    with pytest.raises(BadFileError, match=rf"^{path}:6:22: invalid JSON: Expecting property name"):
        load_predictions(str(path), GT)


# ----------------------------------------------------------------------------- phrase filter
FILTER = PhraseFilter({"1000": {"red", "man"}, "1001": []}, {"1000": [4, 1], "1001": [0, 2]}, top_n=2,
                      retrieval_model={"config": "vsepp.yaml"}).to_json()


@fuzz_settings
@given(data=damaged_json(FILTER))
def test_phrase_filter(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "phrase_filter.json", data)
    check_reader(lambda: PhraseFilter.load(path), path)


def test_phrase_filter_messages(tmp_path):
    path = tmp_path / "phrase_filter.json"
    path.write_text(json.dumps({**FILTER, "images": {"1000": {"captions": [4, -1], "tokens": ["man"]}}}))
    with pytest.raises(BadFileError, match=rf"^{path}: image '1000': key 'captions': must be a list of caption indices "
                                           r"\(integers >= 0\), got \[4, -1\]$"):
        PhraseFilter.load(str(path))
    path.write_text(json.dumps({**FILTER, "images": {"1000": {"captions": [4]}}}))
    with pytest.raises(BadFileError, match=rf"^{path}: image '1000': missing key 'tokens'$"):
        PhraseFilter.load(str(path))
