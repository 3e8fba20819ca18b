"""The predictions file: the command and the in-loop evaluator agree; malformed records are named."""
import importlib.util
import json
import math
import os

import numpy as np
import pytest
from detectron2.data import DatasetCatalog

import phrasedet  # noqa: F401
from phrasedet.evaluation import (PhraseDetectionEvaluator, evaluate_predictions_file, load_predictions,
                                  test_vocabulary)
from phrasedet.evaluation.phrase_detection.ground_truth import PhraseGroundTruth

from .toy import TOY_TEST, noisy_outputs, register_toy
from ..tool_runs import tool_path

DATASET = "builtin_flickr30k_entities_test"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _same(a: dict, b: dict):
    assert a.keys() == b.keys()
    for key in a["phrase_detection"]:
        x, y = a["phrase_detection"][key], b["phrase_detection"][key]
        assert (math.isnan(x) and math.isnan(y)) or x == y, key


def _run_evaluator(dataset, output_dir, mode, k=2, ties=True, order=None):
    dicts = DatasetCatalog.get(dataset)
    phrases = test_vocabulary(dicts)
    evaluator = PhraseDetectionEvaluator(dataset, mode=mode, output_dir=str(output_dir), distributed=False)
    evaluator.reset()
    for n in order if order is not None else range(len(dicts)):
        evaluator.process([dicts[n]], [noisy_outputs(dicts[n], phrases, k=k, ties=ties)])
    return evaluator.evaluate()


@pytest.fixture(scope="module")
def builtin_run(builtin_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("builtin_eval")
    n = len(DatasetCatalog.get(DATASET))
    order = list(range(n))[::-1]  # images arrive in reverse: the dataset order still breaks ties
    return out, {mode: _run_evaluator(DATASET, out / mode, mode, order=order) for mode in ("reference", "standard")}


@pytest.mark.parametrize("mode", ["reference", "standard"])
def test_command_agrees_with_in_loop_evaluator_jsonl_and_json(builtin_run, mode, tmp_path):
    out, results = builtin_run
    m = results[mode]["phrase_detection"]
    assert 0 < m["mAP"] < 100 and 0 < m["loc_acc"] < 100
    assert all(m[f"num_phrases_{b}"] > 0 for b in ("zero_shot", "few_shot", "common"))
    jsonl = out / mode / "phrase_predictions.jsonl"
    _same(results[mode], evaluate_predictions_file(str(jsonl), DATASET, mode))

    # the same records as a JSON list, images in another order (k is the order inside an (image, phrase))
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    by_image = {}
    for r in records:
        by_image.setdefault(r["image_id"], []).append(r)
    as_list = tmp_path / "predictions.json"
    as_list.write_text(json.dumps([r for image_id in sorted(by_image) for r in by_image[image_id]]))
    _same(results[mode], evaluate_predictions_file(str(as_list), DATASET, mode))

    aps = json.loads((out / mode / "phrase_aps.json").read_text())
    assert {"phrase", "bucket", "train_count", "num_gt", "ap"} <= set(aps[0])
    assert sum(a["num_gt"] for a in aps) == sum(len(d["annotations"]) for d in DatasetCatalog.get(DATASET))


def test_tool_prints_table_and_writes_results(builtin_run, tmp_path, capsys):
    out, results = builtin_run
    path = tool_path("evaluate_predictions.py")
    spec = importlib.util.spec_from_file_location("evaluate_predictions", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    got = tool.main(["--predictions", str(out / "standard" / "phrase_predictions.jsonl"), "--dataset", DATASET,
                     "--mode", "standard", "--output-dir", str(tmp_path)])
    _same(results["standard"], got)
    printed = capsys.readouterr().out
    assert "zero_shot" in printed and "all (mean of buckets)" in printed
    _same(results["standard"], json.loads((tmp_path / "phrase_detection_results.json").read_text()))


def test_evaluator_without_ties_and_k1(tmp_path):
    register_toy()
    a = _run_evaluator(TOY_TEST, tmp_path / "a", "reference", k=1, ties=False)
    b = evaluate_predictions_file(str(tmp_path / "a" / "phrase_predictions.jsonl"), TOY_TEST, "reference")
    _same(a, b)


# ----------------------------------------------------------------------------- malformed files
@pytest.fixture
def toy_gt():
    register_toy()
    return PhraseGroundTruth.from_dataset_dicts(DatasetCatalog.get(TOY_TEST))


GOOD = {"image_id": "1000", "phrase": "man", "box": [0, 0, 10, 10], "score": 0.5}


@pytest.mark.parametrize("bad, key", [
    ({k: v for k, v in GOOD.items() if k != "score"}, "score"),
    (dict(GOOD, box=[0, 0, 10]), "box"),
    (dict(GOOD, box=[0, 0, 10, "x"]), "box"),
    (dict(GOOD, score="high"), "score"),
    (dict(GOOD, image_id=1000), "image_id"),
    (dict(GOOD, phrase=None), "phrase"),
    (dict(GOOD, image_id="999999"), "image_id"),  # unknown image
])
def test_malformed_record_names_file_record_and_key(toy_gt, tmp_path, bad, key):
    lines = tmp_path / "p.jsonl"
    lines.write_text("\n".join([json.dumps(GOOD), "", json.dumps(bad)]) + "\n")
    with pytest.raises(ValueError) as e:
        load_predictions(str(lines), toy_gt)
    assert str(lines) in str(e.value) and "line 3" in str(e.value) and repr(key) in str(e.value)
    listed = tmp_path / "p.json"
    listed.write_text(json.dumps([GOOD, bad]))
    with pytest.raises(ValueError) as e:
        load_predictions(str(listed), toy_gt)
    assert str(listed) in str(e.value) and "record 2" in str(e.value) and repr(key) in str(e.value)
    if bad.get("image_id") == "999999":
        assert "999999" in str(e.value)


def test_format_detection_and_unknown_phrases(toy_gt, tmp_path):
    # a file without the .jsonl suffix whose first character is not "[" is JSON lines;
    # records of non-test phrases are ignored; several records of a pair are its K detections
    path = tmp_path / "preds.txt"
    recs = [GOOD, dict(GOOD, score=0.25), dict(GOOD, phrase="not a test phrase"), dict(GOOD, score=-math.inf)]
    path.write_text("\n".join(json.dumps(r) for r in recs))
    d = load_predictions(str(path), toy_gt)
    assert d.k == 3
    j = toy_gt.phrase_index["man"]
    np.testing.assert_array_equal(d.scores[0, j], [0.5, 0.25, -np.inf])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(GOOD) + "\n{not json\n")
    with pytest.raises(ValueError, match=f"^{bad}:2:2: invalid JSON: Expecting property name"):
        load_predictions(str(bad), toy_gt)


@pytest.mark.parametrize("box, why", [
    ([10, 0, 5, 10], "x2 < x1 or y2 < y1"),
    ([0, 10, 10, 5], "x2 < x1 or y2 < y1"),
    ([0, 0, math.inf, 10], "coordinates must be finite"),
])
def test_a_reversed_or_infinite_box_is_an_error_naming_the_record(toy_gt, tmp_path, box, why):
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join([json.dumps(GOOD), json.dumps(dict(GOOD, box=box))]) + "\n")
    with pytest.raises(ValueError, match=f"{path}: line 2: key 'box': {why}"):
        load_predictions(str(path), toy_gt)
    path.write_text(json.dumps(dict(GOOD, box=[5, 5, 5, 5])))  # a zero-area box is a box
    assert load_predictions(str(path), toy_gt).k == 1


def test_an_empty_predictions_file_is_an_error(toy_gt, tmp_path):
    for name, text in (("empty.jsonl", ""), ("blank.jsonl", "\n\n"), ("empty.json", "[]")):
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError, match=f"{tmp_path / name}: the predictions file holds no records"):
            load_predictions(str(tmp_path / name), toy_gt)


def test_raw_phrases_are_normalized_and_a_file_of_unknown_phrases_fails(toy_gt, tmp_path, caplog):
    path = tmp_path / "raw.jsonl"
    path.write_text("\n".join(json.dumps(dict(GOOD, phrase=p)) for p in ("The Man", "man", "a MAN .")) + "\n")
    with caplog.at_level("INFO"):
        d = load_predictions(str(path), toy_gt)
    np.testing.assert_array_equal(d.scores[0, toy_gt.phrase_index["man"]], [0.5, 0.5, 0.5])
    assert "2 records of 2 phrases were not normalized and were normalized with normalize_phrase" in caplog.text
    path.write_text("\n".join(json.dumps(dict(GOOD, phrase=p)) for p in ("man", "zebra", "giraffe")) + "\n")
    with pytest.raises(ValueError, match=r"2 of 3 records \(66.7 %, more than 50 %\) name phrases that are not test phrases"):
        load_predictions(str(path), toy_gt)
    assert load_predictions(str(path), toy_gt, max_ignored_fraction=0.7).k == 1  # 2 of 3 allowed
