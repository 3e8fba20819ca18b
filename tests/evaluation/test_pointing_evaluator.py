"""PointingGameEvaluator on a registered toy split: both output kinds, saved predictions, errors."""
import json
import logging

import numpy as np
import pytest
import torch
from detectron2.data import DatasetCatalog, MetadataCatalog
from detectron2.evaluation import inference_on_dataset, print_csv_format
from detectron2.utils import comm  # the evaluators gather through it (phrasedet/evaluation/distributed.py)

from phrasedet.evaluation import (POINTING_PREDICTIONS_FILE, POINTING_RESULTS_FILE, PointingGameEvaluator,
                                  evaluate_points_file, load_pointing_predictions)

# ----------------------------------------------------------------------------- the toy split
POINTING_TOY = "evaltest_pointing_toy"
# img0: 200 x 100 (centre (100, 50)); img1: no query; img2: 80 x 40 (centre (40, 20))
QUERIES = {
    "img0": [("q0", "man", [10.0, 10.0, 50.0, 90.0]), ("q1", "dog", [90.0, 40.0, 110.0, 60.0]),
             ("q2", "red car", [150.0, 20.0, 190.0, 50.0])],
    "img1": [],
    "img2": [("q3", "man", [0.0, 0.0, 40.0, 40.0]), ("q4", "tree", [60.0, 30.0, 80.0, 40.0])],
}
SIZES = {"img0": (100, 200), "img1": (60, 60), "img2": (40, 80)}
# model points: q0 inside; q1 on the right edge; q2 15 px from the corner (190, 50) along (9, 12);
# q3 inside; q4 15.01 px left of the box
POINTS = {"q0": (30.0, 50.0), "q1": (110.0, 50.0), "q2": (199.0, 62.0), "q3": (20.0, 20.0), "q4": (44.99, 35.0)}
# hits (model): strict q0 q3; inclusive + q1; tol15 + q2. Centre: q1 strict; q3 (on its edge) inclusive and tol15
EXPECTED = {"accuracy": 40.0, "centre_accuracy": 20.0, "accuracy_strict": 40.0, "accuracy_inclusive": 60.0,
            "accuracy_tol15": 80.0, "centre_accuracy_strict": 20.0, "centre_accuracy_inclusive": 40.0,
            "centre_accuracy_tol15": 40.0, "num_queries": 5, "num_images": 2, "tolerance": 15.0}


def pointing_toy_dicts():
    return [{"file_name": f"{i}.jpg", "image_id": i, "height": SIZES[i][0], "width": SIZES[i][1],
             "queries": [{"text": f"a {p}", "phrase": p, "bbox": b, "query_id": q} for q, p, b in qs]}
            for i, qs in QUERIES.items()]


def register(name=POINTING_TOY, dicts=pointing_toy_dicts):
    if name not in DatasetCatalog.list():
        DatasetCatalog.register(name, dicts)
        MetadataCatalog.get(name).set(evaluator_type="pointing")
    return name


def point_outputs(record):
    """DSVE-loc: one point per query in record order (heatmaps ignored)."""
    points = [POINTS[q["query_id"]] for q in record["queries"]]
    return {"points": torch.tensor(points, dtype=torch.float32).reshape(-1, 2), "heatmaps": torch.zeros(3, 2, 2)}


VOCABULARY = ["dog", "man", "red car", "sky", "tree"]


def detector_outputs(record):
    """PhraseRCNN: every image scores the same vocabulary (K = 3); the top box of each query's phrase
    is centred on the query's point, a lower or NaN-scored box elsewhere; ties go to the smaller k."""
    scores = np.full((len(VOCABULARY), 3), np.nan, np.float32)
    boxes = np.zeros((len(VOCABULARY), 3, 4), np.float32)
    for q in record["queries"]:
        r = VOCABULARY.index(q["phrase"])
        x, y = POINTS[q["query_id"]]
        scores[r] = [0.2, 0.9, 0.9]
        boxes[r, 0] = boxes[r, 2] = [0.0, 0.0, 2.0, 2.0]
        boxes[r, 1] = [x - 4.0, y - 2.0, x + 4.0, y + 2.0]
    return {"phrases": VOCABULARY, "scores": torch.from_numpy(scores), "boxes": torch.from_numpy(boxes)}


def run(evaluator, outputs_of=point_outputs, order=(2, 1, 0), batch=2):
    dicts = DatasetCatalog.get(POINTING_TOY)
    dicts = [dicts[n] for n in order]
    evaluator.reset()
    for start in range(0, len(dicts), batch):
        inputs = [{"image_id": d["image_id"]} for d in dicts[start:start + batch]]
        evaluator.process(inputs, [outputs_of(d) for d in dicts[start:start + batch]])
    return evaluator.evaluate()


# ----------------------------------------------------------------------------- results
def test_points_outputs_give_the_hand_computed_accuracies(caplog):
    register()
    with caplog.at_level(logging.INFO):
        results = run(PointingGameEvaluator(POINTING_TOY))
    assert results == {"pointing": EXPECTED}
    assert "hit rule strict (x1 < x < x2 and y1 < y < y2); tolerance 15 px" in caplog.text
    assert "| strict (main) | x1 < x < x2 and y1 < y < y2" in caplog.text
    assert "distance(point, box) <= 15 px" in caplog.text


def test_phrase_detector_outputs_point_at_the_top_box_centre():
    register()
    assert run(PointingGameEvaluator(POINTING_TOY), outputs_of=detector_outputs, order=(0, 1, 2)) == \
        {"pointing": EXPECTED}


def test_the_main_rule_and_the_tolerance():
    register()
    results = run(PointingGameEvaluator(POINTING_TOY, hit_rule="tolerance", tolerance=14.99))["pointing"]
    assert results["accuracy"] == results["accuracy_tol14.99"] == 60.0  # q2 (exactly 15 px) now misses
    assert results["centre_accuracy"] == 40.0 and results["tolerance"] == 14.99
    results = run(PointingGameEvaluator(POINTING_TOY, hit_rule="inclusive"))["pointing"]
    assert (results["accuracy"], results["centre_accuracy"]) == (60.0, 40.0)


def test_runs_in_detectron2_inference_and_prints_csv(caplog):
    register()

    class ToyModel(torch.nn.Module):
        def forward(self, inputs):
            return [point_outputs(d) for d in inputs]

    dicts = DatasetCatalog.get(POINTING_TOY)
    results = inference_on_dataset(ToyModel(), [dicts[:2], dicts[2:]], PointingGameEvaluator(POINTING_TOY))
    assert results == {"pointing": EXPECTED}
    with caplog.at_level(logging.INFO):
        print_csv_format(results)  # numbers only: Detectron2 formats every value with {:.4f}
    assert "copypaste: Task: pointing" in caplog.text


def test_saved_predictions_round_trip(tmp_path):
    register()
    results = run(PointingGameEvaluator(POINTING_TOY, hit_rule="inclusive", output_dir=str(tmp_path)))
    saved = load_pointing_predictions(str(tmp_path / POINTING_PREDICTIONS_FILE))
    assert saved["query_id"] == ["q0", "q1", "q2", "q3", "q4"]
    assert saved["image_id"] == ["img0", "img0", "img0", "img2", "img2"]
    assert saved["points"].tolist() == [list(np.float32(POINTS[q]).astype(float)) for q in saved["query_id"]]
    assert saved["boxes"].tolist() == [b for i in ("img0", "img2") for _, _, b in QUERIES[i]]
    assert {k: v.tolist() for k, v in saved["hits"].items()} == {
        "strict": [True, False, False, True, False], "inclusive": [True, True, False, True, False],
        "tol15": [True, True, True, True, False]}
    assert saved["protocol"] == ("inclusive", 15.0)
    written = json.loads((tmp_path / POINTING_RESULTS_FILE).read_text())
    assert written["pointing"] == results["pointing"]
    assert written["protocol"] == {"hit_rule": "inclusive", "tolerance": 15.0, "main_key": "inclusive",
                                   "description": "hit rule inclusive (x1 <= x <= x2 and y1 <= y <= y2); "
                                                  "tolerance 15 px"}
    # the saved points evaluate to the in-loop numbers
    assert evaluate_points_file(str(tmp_path / POINTING_PREDICTIONS_FILE), POINTING_TOY, "inclusive") == results


def test_no_files_without_save_predictions(tmp_path):
    register()
    run(PointingGameEvaluator(POINTING_TOY, output_dir=str(tmp_path), save_predictions=False))
    assert sorted(p.name for p in tmp_path.iterdir()) == [POINTING_RESULTS_FILE]


# ----------------------------------------------------------------------------- errors
def test_images_never_processed_are_an_error():
    register()
    with pytest.raises(ValueError, match=r"^1 of the 2 images with queries of 'evaltest_pointing_toy' were never "
                                         r"processed \(2 of 5 queries\), e.g. image_id \['img2'\]$"):
        run(PointingGameEvaluator(POINTING_TOY), order=(0, 1))
    # an image without queries need not be processed
    assert run(PointingGameEvaluator(POINTING_TOY), order=(0, 2)) == {"pointing": EXPECTED}
    with pytest.raises(ValueError, match=r"evaluated more than once, e.g. image_id \['img0'\]"):
        run(PointingGameEvaluator(POINTING_TOY), order=(0, 2, 0))


def test_a_distributed_non_main_process_returns_nothing(monkeypatch):
    register()
    evaluator = PointingGameEvaluator(POINTING_TOY)
    monkeypatch.setattr(comm, "get_world_size", lambda: 2)
    monkeypatch.setattr(comm, "synchronize", lambda: None)
    monkeypatch.setattr(comm, "gather", lambda data, dst=0: [])
    monkeypatch.setattr(comm, "is_main_process", lambda: False)
    assert run(evaluator, order=(0,)) == {}
    # the main process gets every part, in any order
    other = PointingGameEvaluator(POINTING_TOY)
    img2 = DatasetCatalog.get(POINTING_TOY)[2]
    other.process([img2], [point_outputs(img2)])
    monkeypatch.setattr(comm, "gather", lambda data, dst=0: [other._seen, data])
    monkeypatch.setattr(comm, "is_main_process", lambda: True)
    assert run(evaluator, order=(0,)) == {"pointing": EXPECTED}


def test_output_errors_name_the_image():
    register()
    evaluator = PointingGameEvaluator(POINTING_TOY)
    record = DatasetCatalog.get(POINTING_TOY)[0]
    with pytest.raises(ValueError, match=r"^image_id 'nope' is not in dataset 'evaltest_pointing_toy'$"):
        evaluator.process([{"image_id": "nope"}], [point_outputs(record)])
    with pytest.raises(ValueError, match=r"image_id 'img0': 'points' must have shape \[3, 2\] .*got \(2, 2\)"):
        evaluator.process([record], [{"points": torch.zeros(2, 2)}])
    missing = {**detector_outputs(record), "phrases": ["dog", "man", "sky"]}
    with pytest.raises(ValueError, match=r"^image_id 'img0': query phrase 'red car' is not among the 3 phrases of "
                                         r"the model output$"):
        evaluator.process([record], [missing])
    with pytest.raises(ValueError, match=r"image_id 'img0': the model output has neither 'points'"):
        evaluator.process([record], [{"instances": None}])


def test_a_phrase_without_detection_misses():
    register()

    def no_car(record):
        out = detector_outputs(record)
        out["scores"][VOCABULARY.index("red car")] = float("nan")
        return out

    results = run(PointingGameEvaluator(POINTING_TOY), outputs_of=no_car)["pointing"]
    assert results["accuracy_tol15"] == 60.0  # q2 (a tol15 hit) lost


def test_bad_arguments_and_datasets_fail_before_inference():
    register()
    with pytest.raises(ValueError, match="hit_rule must be one of"):
        PointingGameEvaluator(POINTING_TOY, hit_rule="inside")
    with pytest.raises(ValueError, match="tolerance must be a finite number"):
        PointingGameEvaluator(POINTING_TOY, tolerance=-1.0)

    def bad_box():
        dicts = pointing_toy_dicts()
        dicts[2]["queries"][1]["bbox"] = [60.0, 30.0, 50.0, 40.0]
        return dicts

    def no_queries():
        return [{"image_id": "a", "height": 10, "width": 10}]

    def twice():
        dicts = pointing_toy_dicts()
        dicts[2]["queries"][0]["query_id"] = "q0"
        return dicts

    with pytest.raises(ValueError, match=r"^dataset 'evaltest_pointing_bad_box': query_id 'q4': key 'bbox': "
                                         r"\[60.0, 30.0, 50.0, 40.0\] is not a box"):
        PointingGameEvaluator(register("evaltest_pointing_bad_box", bad_box))
    with pytest.raises(ValueError, match=r"^dataset 'evaltest_pointing_no_queries': record 0: no key 'queries'"):
        PointingGameEvaluator(register("evaltest_pointing_no_queries", no_queries))
    with pytest.raises(ValueError, match=r"^dataset 'evaltest_pointing_twice': query_id 'q0' appears twice"):
        PointingGameEvaluator(register("evaltest_pointing_twice", twice))


def test_infinite_points_and_detections_with_boxes_that_are_not_finite_are_errors():
    """Issue 23: a NaN point is "no answer" (a miss) and a NaN score "no detection", but an
    infinite point, or a non-finite box of a scored detection (a diverged model), names its image."""
    register()

    def infinite_point(d):
        out = point_outputs(d)
        if d["image_id"] == "img0":
            out["points"][2, 0] = float("inf")
        return out

    with pytest.raises(ValueError) as e:
        run(PointingGameEvaluator(POINTING_TOY), outputs_of=infinite_point)
    assert str(e.value) == ("image_id 'img0': 'points' row 2 ('red car'): values must be finite numbers or NaN (no "
                            "answer), got [inf, 62.0] (1 such rows; a diverged model?)")

    def nan_box(d):
        out = detector_outputs(d)
        out["boxes"][VOCABULARY.index("man"), 2, 1] = float("nan")  # score 0.9: a detection
        return out

    with pytest.raises(ValueError) as e:
        run(PointingGameEvaluator(POINTING_TOY), outputs_of=nan_box)
    assert str(e.value).startswith("image_id 'img2': 'boxes' row 1 ('man'): values must be finite numbers where the "
                                   "score is not NaN, got [[")

    def nan_box_without_score(d):  # "dog" row of img2 has NaN scores: its boxes are never read
        out = detector_outputs(d)
        out["boxes"][VOCABULARY.index("sky")] = float("nan")
        return out

    assert run(PointingGameEvaluator(POINTING_TOY), outputs_of=nan_box_without_score)["pointing"]["accuracy"] == \
        run(PointingGameEvaluator(POINTING_TOY), outputs_of=detector_outputs)["pointing"]["accuracy"]


def test_points_come_back_as_float64_from_any_float_input():
    from phrasedet.evaluation.pointing.outputs import OutputPoints, box_centres

    points = OutputPoints()
    for given in (torch.tensor([[1.5, 2.25]], dtype=torch.bfloat16), np.array([[1.5, 2.25]], dtype=np.float32)):
        out = points("7", {"points": given}, ["a"])
        assert out.dtype == np.float64 and out.tolist() == [[1.5, 2.25]]
    assert box_centres(np.array([0.0, 2.0, 4.0, 10.0])).tolist() == [2.0, 6.0]  # one box
    assert box_centres(np.zeros((2, 3, 4))).shape == (2, 3, 2)


def test_detections_keep_float64_precision_skip_nan_scores_and_miss_rows_without_any():
    from phrasedet.evaluation.pointing.outputs import OutputPoints

    third = 1.0 / 3.0  # not a float32 number: a float32 pass would move the centre
    scores = torch.tensor([[0.5, 0.5 + 1e-12, float("nan")], [float("nan"), float("nan"), float("nan")],
                           [float("nan"), 0.2, 0.9]], dtype=torch.float64)
    boxes = torch.tensor([[[0, 0, 2, 2], [third, third, third, third], [5, 5, 6, 6]],
                          [[1, 1, 3, 3]] * 3,
                          [[10, 10, 20, 20], [0, 0, 2, 2], [4, 4, 8, 8]]], dtype=torch.float64)
    output = {"phrases": ["a", "b", "c"], "scores": scores, "boxes": boxes}
    out = OutputPoints()("7", output, ["a", "b", "c"])
    assert out[0].tolist() == [third, third]      # 0.5 + 1e-12 beats 0.5 in float64, not in float32
    assert np.isnan(out[1]).all()                 # every score NaN: no point, though the boxes are finite
    assert out[2].tolist() == [6.0, 6.0]          # the NaN score is no detection: 0.9 wins, not the NaN


def test_the_phrase_index_is_kept_for_an_equal_list_and_rebuilt_for_another():
    from phrasedet.evaluation.pointing.outputs import OutputPoints

    points = OutputPoints()
    scores, boxes = torch.tensor([[1.0], [1.0]]), torch.tensor([[[0.0, 0, 2, 2]], [[4.0, 4, 8, 8]]])
    assert points("1", {"phrases": ["a", "b"], "scores": scores, "boxes": boxes}, ["b"]).tolist() == [[6.0, 6.0]]
    index = points._index
    points("2", {"phrases": ["a", "b"], "scores": scores, "boxes": boxes}, ["b"])
    assert points._index is index  # an equal list (another object): built once
    assert points("3", {"phrases": ["b", "a"], "scores": scores, "boxes": boxes}, ["b"]).tolist() == [[1.0, 1.0]]
    with pytest.raises(ValueError) as error:
        points("4", {"phrases": ["a"], "boxes": boxes}, ["a"])
    assert str(error.value) == "image_id '4': the model output has 'phrases' but no 'scores'"
