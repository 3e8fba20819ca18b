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
    arrays = _arrays(EMBEDDINGS)
    path = _savez(tmp_path, "e.npz", {**arrays, "captions": np.where(np.eye(5, 4) > 0, np.nan, CAPTIONS)})
    with pytest.raises(BadFileError,
                       match=rf"^{path}: key 'captions': row 0: values must be finite numbers \(4 such rows\)$"):
        load_embeddings(path)
    path = _savez(tmp_path, "e2.npz", {**arrays, "images": IMAGES.astype(np.complex64)})
    with pytest.raises(BadFileError,
                       match=rf"^{path}: key 'images': expected a 2-D array of kind 'f', got dtype complex64"):
        load_embeddings(path)
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
