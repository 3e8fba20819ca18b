"""tools/evaluation/evaluate_pointing.py on saved points and heatmaps: hand-computed accuracies, the in-loop
numbers, and errors naming the file and the query id."""
import json

import numpy as np
import pytest

from phrasedet.evaluation import (POINTING_PREDICTIONS_FILE, PointingGameEvaluator, PointingProtocol, align_queries,
                                  evaluate_heatmaps_file, evaluate_points, evaluate_points_file, load_pointing_split,
                                  save_heatmaps, save_points)

from .retrieval_toy import load_tool
from .test_pointing_evaluator import EXPECTED, POINTING_TOY, POINTS, register, run

QUERY_IDS = ["q0", "q1", "q2", "q3", "q4"]


@pytest.fixture(scope="module")
def tool():
    register()
    return load_tool("evaluate_pointing")


def _exit_message(tool, argv) -> str:
    with pytest.raises(SystemExit) as e:
        tool.main(argv)
    return str(e.value.code)


def test_saved_points_in_any_order(tool, tmp_path, capsys):
    order = [4, 2, 0, 3, 1]
    path = str(tmp_path / "points.npz")
    save_points(path, [QUERY_IDS[n] for n in order], [POINTS[QUERY_IDS[n]] for n in order])
    out = tmp_path / "results.json"
    results = tool.main(["--dataset", POINTING_TOY, "--points", path, "--output", str(out)])
    expected = {**EXPECTED, "accuracy": 80.0, "centre_accuracy": 40.0}  # main rule tol15
    assert results == {"pointing": EXPECTED}
    printed = capsys.readouterr().out
    assert f"Pointing game on {POINTING_TOY} from {path} (5 queries, 2 images; hit rule strict " \
           "(x1 < x < x2 and y1 < y < y2); tolerance 15 px), accuracy in %:" in printed
    assert "| strict (main)" in printed and "| tol15 " in printed
    written = json.loads(out.read_text())
    assert written["pointing"] == EXPECTED and written["protocol"]["hit_rule"] == "strict"
    results = tool.main(["--dataset", POINTING_TOY, "--points", path, "--hit-rule", "tolerance"])
    assert results == {"pointing": expected}


def test_the_in_loop_predictions_file_gives_the_in_loop_numbers(tool, tmp_path):
    in_loop = run(PointingGameEvaluator(POINTING_TOY, hit_rule="tolerance", tolerance=10, output_dir=str(tmp_path)))
    path = str(tmp_path / POINTING_PREDICTIONS_FILE)
    assert tool.main(["--dataset", POINTING_TOY, "--points", path, "--hit-rule", "tolerance",
                      "--tolerance", "10"]) == in_loop


def _heatmaps():
    """4 x 4 maps, one hot. Corner points: img0 (200 x 100) cell (i, j) -> (50 j, 25 i); img2 (80 x 40)
    -> (20 j, 10 i). Centre points add half a cell."""
    cells = {"q0": (1, 0), "q1": (2, 2), "q2": (2, 3), "q3": (1, 1), "q4": (0, 0)}
    maps = np.zeros((5, 4, 4), np.float32)
    for n, q in enumerate(QUERY_IDS):
        maps[(n,) + cells[q]] = 1.0
    return maps


def test_saved_heatmaps_corner_and_centre(tool, tmp_path):
    path = str(tmp_path / "heatmaps.npz")
    save_heatmaps(path, QUERY_IDS[::-1], _heatmaps()[::-1])
    # corner: q0 (0, 25) 10 px left of its box; q1 (100, 50) inside; q2 (150, 50) on its corner (150, 50);
    # q3 (20, 10) inside; q4 (0, 0) far
    corner = tool.main(["--dataset", POINTING_TOY, "--heatmaps", path])["pointing"]
    assert (corner["accuracy_strict"], corner["accuracy_inclusive"], corner["accuracy_tol15"]) == (40.0, 60.0, 80.0)
    # centre: q0 (25, 37.5) inside; q1 (125, 62.5) > 15 px away; q2 (175, 62.5) 12.5 px below; q3 (30, 15) inside
    centre = tool.main(["--dataset", POINTING_TOY, "--heatmaps", path, "--point-mode", "centre"])["pointing"]
    assert (centre["accuracy_strict"], centre["accuracy_inclusive"], centre["accuracy_tol15"]) == (40.0, 40.0, 60.0)
    assert centre["centre_accuracy_strict"] == corner["centre_accuracy_strict"] == 20.0
    # the file's point mode is the default
    save_heatmaps(path, QUERY_IDS, _heatmaps(), point_mode="centre")
    assert evaluate_heatmaps_file(path, POINTING_TOY)["pointing"] == centre
    assert _exit_message(tool, ["--dataset", POINTING_TOY, "--heatmaps", path, "--point-mode", "corner"]) == \
        f"error: {path}: key 'point_mode': the file says 'centre', but point mode 'corner' was asked"


def test_missing_extra_and_repeated_queries_name_the_file_and_the_query(tool, tmp_path):
    path = str(tmp_path / "p.npz")
    save_points(path, QUERY_IDS[:4], [POINTS[q] for q in QUERY_IDS[:4]])
    assert _exit_message(tool, ["--dataset", POINTING_TOY, "--points", path]) == \
        f"error: {path}: 1 of the 5 queries of dataset '{POINTING_TOY}' are missing, e.g. query_id 'q4'"
    save_points(path, QUERY_IDS + ["zz"], [POINTS[q] for q in QUERY_IDS] + [(0.0, 0.0)])
    assert _exit_message(tool, ["--dataset", POINTING_TOY, "--points", path]) == \
        f"error: {path}: key 'query_id': 1 query ids are not queries of dataset '{POINTING_TOY}', e.g. query_id 'zz'"
    save_points(path, QUERY_IDS + ["q1"], [POINTS[q] for q in QUERY_IDS] + [(0.0, 0.0)])
    assert _exit_message(tool, ["--dataset", POINTING_TOY, "--points", path]) == \
        f"error: {path}: key 'query_id': 1 query ids appear more than once, e.g. query_id 'q1'"


def test_malformed_files_name_the_file_and_the_key(tool, tmp_path):
    path = str(tmp_path / "bad.npz")
    np.savez(path, query_id=np.array(QUERY_IDS), xy=np.zeros((5, 2)))
    assert _exit_message(tool, ["--dataset", POINTING_TOY, "--points", path]) == \
        f"error: {path}: missing key 'points' (the file holds ['query_id', 'xy'])"
    np.savez(path, query_id=np.array(QUERY_IDS), points=np.zeros((5, 3)))
    assert _exit_message(tool, ["--dataset", POINTING_TOY, "--points", path]) == \
        f"error: {path}: key 'points': expected shape [queries, 2] as (x, y), got (5, 3)"
    np.savez(path, query_id=np.array(QUERY_IDS), heatmaps=np.zeros((4, 2, 2)))
    assert _exit_message(tool, ["--dataset", POINTING_TOY, "--heatmaps", path]) == \
        f"error: {path}: key 'heatmaps': has 4 entries, but there are 5 entries in 'query_id'"
    assert _exit_message(tool, ["--dataset", POINTING_TOY, "--points", str(tmp_path / "none.npz")]) == \
        f"error: a points file {str(tmp_path / 'none.npz')!r} does not exist"
    assert _exit_message(tool, ["--dataset", POINTING_TOY, "--points", path, "--tolerance", "-2"]) == \
        "error: tolerance must be a finite number of pixels >= 0, got -2.0"


def test_integer_query_ids_are_read_as_strings(tool, tmp_path):
    def numbered():
        from .test_pointing_evaluator import pointing_toy_dicts

        dicts = pointing_toy_dicts()
        for d in dicts:
            for q in d["queries"]:
                q["query_id"] = q["query_id"][1:]
        return dicts

    name = register("evaltest_pointing_numbered", numbered)
    path = str(tmp_path / "int_ids.npz")
    np.savez(path, query_id=np.arange(5), points=np.array([POINTS[q] for q in QUERY_IDS]))
    assert tool.main(["--dataset", name, "--points", path]) == {"pointing": EXPECTED}


# ----------------------------------------------------------------------------- align_queries, evaluate_points
def _toy_truth():
    register()
    return load_pointing_split(POINTING_TOY)


def test_align_queries_gives_each_querys_row_in_the_file():
    # file rows q4 q2 q0 q3 q1: dataset query q0 is row 2, q1 row 4, ...
    rows = align_queries("f.npz", _toy_truth(), ["q4", "q2", "q0", "q3", "q1"])
    assert rows.dtype == np.int64 and rows.tolist() == [2, 4, 1, 3, 0]


@pytest.mark.parametrize("query_ids, message", [
    # the query of file row 0 repeated (row 0 is a valid row, not "unset")
    (QUERY_IDS + ["q0"], "f.npz: key 'query_id': 1 query ids appear more than once, e.g. query_id 'q0'"),
    (QUERY_IDS + ["q3", "q1", "q2"],
     "f.npz: key 'query_id': 3 query ids appear more than once, e.g. query_id 'q3', 'q1', 'q2'"),
    (QUERY_IDS + ["q3", "q1", "q2", "q0"],
     "f.npz: key 'query_id': 4 query ids appear more than once, e.g. query_id 'q3', 'q1', 'q2', ..."),
    (QUERY_IDS + ["b", "a", "c"],
     f"f.npz: key 'query_id': 3 query ids are not queries of dataset '{POINTING_TOY}', e.g. query_id 'b', 'a', 'c'"),
    (QUERY_IDS + ["b", "a", "c", "d"],
     f"f.npz: key 'query_id': 4 query ids are not queries of dataset '{POINTING_TOY}', "
     "e.g. query_id 'b', 'a', 'c', ..."),
    (["q4", "q1"], f"f.npz: 3 of the 5 queries of dataset '{POINTING_TOY}' are missing, e.g. query_id 'q0', 'q2', 'q3'"),
    (["q2"], f"f.npz: 4 of the 5 queries of dataset '{POINTING_TOY}' are missing, e.g. query_id 'q0', 'q1', 'q3', ..."),
    # a repeat is reported before an unknown id, an unknown id before a missing query
    (["zz", "q0", "q0"], "f.npz: key 'query_id': 1 query ids appear more than once, e.g. query_id 'q0'"),
    (["zz", "q0"],
     f"f.npz: key 'query_id': 1 query ids are not queries of dataset '{POINTING_TOY}', e.g. query_id 'zz'"),
])
def test_align_queries_errors_name_the_file_and_at_most_three_ids(query_ids, message):
    with pytest.raises(ValueError) as e:
        align_queries("f.npz", _toy_truth(), query_ids)
    assert str(e.value) == message


def test_evaluate_points_needs_one_point_per_query():
    with pytest.raises(ValueError) as e:
        evaluate_points(_toy_truth(), np.zeros((4, 2)), PointingProtocol())
    assert str(e.value) == \
        f"dataset '{POINTING_TOY}': expected points of shape [5, 2] (one per query), got (4, 2)"


def test_evaluate_points_file_defaults_and_tolerance(tmp_path):
    """Called directly: strict is the default main rule, and the tolerance reaches the metrics
    (at 14.99 px, q2, exactly 15 px from its box, misses)."""
    _toy_truth()
    path = str(tmp_path / "points.npz")
    save_points(path, QUERY_IDS[::-1], [POINTS[q] for q in QUERY_IDS[::-1]])
    assert evaluate_points_file(path, POINTING_TOY) == {"pointing": EXPECTED}
    tol = evaluate_points_file(path, POINTING_TOY, "tolerance", 14.99)["pointing"]
    assert (tol["accuracy"], tol["accuracy_tol14.99"], tol["tolerance"]) == (60.0, 60.0, 14.99)
    save_points(path, QUERY_IDS[:4], [POINTS[q] for q in QUERY_IDS[:4]])
    with pytest.raises(ValueError) as e:
        evaluate_points_file(path, POINTING_TOY)
    assert str(e.value) == f"{path}: 1 of the 5 queries of dataset '{POINTING_TOY}' are missing, e.g. query_id 'q4'"


def test_evaluate_heatmaps_file_with_a_tolerance(tmp_path):
    """Corner points (test_saved_heatmaps_corner_and_centre): q0 is exactly 10 px left of its box,
    a hit at tolerance 10 and a miss at 9.99; q1, q2 and q3 hit at both."""
    _toy_truth()
    path = str(tmp_path / "heatmaps.npz")
    save_heatmaps(path, QUERY_IDS, _heatmaps())
    for tolerance, accuracy in ((10.0, 80.0), (9.99, 60.0)):
        results = evaluate_heatmaps_file(path, POINTING_TOY, hit_rule="tolerance", tolerance=tolerance)["pointing"]
        assert (results["accuracy"], results[f"accuracy_tol{tolerance:g}"], results["tolerance"]) == \
            (accuracy, accuracy, tolerance)


def test_a_heatmaps_file_missing_a_query_is_named(tmp_path):
    _toy_truth()
    path = str(tmp_path / "heatmaps.npz")
    save_heatmaps(path, QUERY_IDS[:4], _heatmaps()[:4])
    with pytest.raises(ValueError) as e:
        evaluate_heatmaps_file(path, POINTING_TOY)
    assert str(e.value) == f"{path}: 1 of the 5 queries of dataset '{POINTING_TOY}' are missing, e.g. query_id 'q4'"


def test_saved_pointing_files_have_their_documented_types_and_layout(tmp_path):
    from phrasedet.evaluation.pointing.dataset import PointingGroundTruth
    from phrasedet.evaluation.pointing.files import save_pointing_predictions, save_points, write_pointing_results

    gt = PointingGroundTruth("toy", ["1"], [[10, 10]], ["q1", "q2"], ["a", "b"], [[0, 0, 1, 1], [0, 0, 2, 2]], [2])
    protocol = PointingProtocol("tolerance", 15)
    path = str(tmp_path / "p.npz")
    save_pointing_predictions(path, gt, np.array([[0.5, 1.5], [2.5, 3.5]], np.float32), {"tol15": np.array([1, 0])},
                              protocol)
    with np.load(path) as npz:
        assert npz["points"].dtype == np.float64 and npz["hit_tol15"].dtype == bool
        assert npz["tolerance"].dtype == np.float64 and float(npz["tolerance"]) == 15.0
        assert npz["hit_tol15"].tolist() == [True, False] and npz["query_id"].tolist() == ["q1", "q2"]
    save_points(str(tmp_path / "q.npz"), [1, 2], np.array([1.5, 2.5, 3.5, 4.5], np.float32))
    with np.load(str(tmp_path / "q.npz")) as npz:
        assert npz["points"].dtype == np.float64 and npz["points"].tolist() == [[1.5, 2.5], [3.5, 4.5]]
    results = str(tmp_path / "r.json")
    write_pointing_results(results, {"pointing": {"accuracy": 50.0}}, protocol)
    with open(results, encoding="utf-8") as f:
        assert f.read() == json.dumps({"pointing": {"accuracy": 50.0}, "protocol": protocol.as_dict()}, indent=1)
