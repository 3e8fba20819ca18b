"""Validation curves of training runs: reading metrics.json, where a curve flattens, the picture
and the table (phrasedet/utils/learning_curves.py), and the comparisons' helpers
(phrasedet/engine/comparison/protocol.py)."""
import glob
import json
import math
import os

import pytest

from phrasedet.engine import pretrained_cnn as pretrained_cnn_module
from phrasedet.engine.comparison.protocol import (budget_opts, dataset_flags, draw_curves, gaining_runs, pretrained_cnn, selected_weights,
                                                   selection_opts)
from phrasedet.utils.learning_curves import (format_plateaus, half_gain, half_gain_iteration, join_phases, plateau_iteration, plot_curves, read_curve,
                                             still_gaining)


def _metrics(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_read_curve_keeps_the_key_in_iteration_order_and_the_last_record_of_an_iteration(tmp_path):
    path = _metrics(tmp_path / "metrics.json", [
        {"iteration": 99, "retrieval/rsum": 10.0}, {"iteration": 19, "total_loss": 3.0},
        {"iteration": 49, "retrieval/rsum": 5.0}, {"iteration": 99, "retrieval/rsum": 12.0}])
    assert read_curve(path) == [(49, 5.0), (99, 12.0)]
    assert read_curve(path, "total_loss") == [(19, 3.0)]


def test_read_curve_names_a_bad_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no metrics file"):
        read_curve(str(tmp_path / "none.json"))
    (tmp_path / "bad.json").write_text('{"iteration": 1}\n{oops\n')
    with pytest.raises(ValueError, match=r"bad\.json:2: not a JSON record"):
        read_curve(str(tmp_path / "bad.json"))


@pytest.mark.parametrize("values, tolerance, expected", [
    ([10, 20, 30, 31, 30, 32], 5, 300),   # from 30 on, never more than 5 above the best so far
    ([10, 20, 30, 31, 30, 32], 1, 400),   # 32 is 2 above 30 but only 1 above 31
    ([50, 40, 45, 49], 5, 100),           # the best is the first value
    ([1, 2, 3, 4, 5, 100], 5, 600),       # still climbing at its end: the last iteration
])
def test_plateau_iteration_by_hand(values, tolerance, expected):
    curve = [(100 * (k + 1), float(v)) for k, v in enumerate(values)]
    assert plateau_iteration(curve, tolerance) == expected
    assert plateau_iteration([], tolerance) == -1


@pytest.mark.parametrize("values, tolerance, gaining", [
    ([10, 20, 30, 30, 30, 30, 30, 30, 30, 35], 1, True),   # flattens at the 10th of 10 points: 1,000 > 900
    ([10, 20, 30, 30, 30, 30, 30, 30, 30, 35], 5, False),  # within 5 from 300 on
    ([10, 20, 30, 30, 30, 30, 30, 30, 34, 30], 1, False),  # flattens at 900: exactly 90 % is not the last tenth
    ([10, 20, 30, 30, 30, 30, 30, 30, 30, 30], 1, False),  # a best at the very start of a flat run
    ([50, 10, 10, 10, 10, 10, 10, 10, 10, 90], 10, True),  # a late best far above an early one
])
def test_still_gaining_is_flattening_only_in_the_last_tenth(values, tolerance, gaining):
    curve = [(100 * (k + 1), float(v)) for k, v in enumerate(values)]
    assert still_gaining(curve, tolerance) is gaining
    assert still_gaining([], tolerance) is False


def test_gaining_runs_names_each_model_s_runs_still_gaining_and_reads_their_phases(tmp_path):
    def run(name, values):
        return _metrics(tmp_path / name, [{"iteration": 100 * (k + 1), "phrase_detection/loc_acc": v} for k, v in enumerate(values)])

    flat, late = [80.0] * 10, [70.0] * 9 + [80.0]
    first, second = run("a1.json", [70.0] * 5), run("a2.json", [70.0] * 4 + [80.0])  # two phases, joined: 10 points
    files = {"cite": [run("c0.json", flat), run("c1.json", late), [first, second]],
             "cite_cca": [run("cc0.json", flat), run("cc1.json", flat), str(tmp_path / "missing.json")]}
    assert gaining_runs(files, ["seed 0", "seed 1", "seed 2"], "phrase_detection/loc_acc", 1.0) == {
        "cite": ["seed 1", "seed 2"]}


def test_the_picture_and_the_table(tmp_path):
    curves = {"vse0": [[(100, 50.0), (200, 60.0)], [(100, 40.0), (200, 70.0)]], "vsepp": [[(100, 30.0), (200, 31.0)]]}
    path = plot_curves(curves, str(tmp_path / "c.png"), "title")
    assert os.path.getsize(path) > 1000 and open(path, "rb").read(4) == bytes([0x89]) + b"PNG"
    assert format_plateaus(curves, 5).splitlines()[2:] == ["| vse0 | 60.0 (200), 70.0 (200) | 200, 200 |",
                                                           "| vsepp | 31.0 (200) | 100 |"]


def test_draw_curves_reads_the_runs_that_exist(tmp_path):
    a = _metrics(tmp_path / "a.json", [{"iteration": 9, "retrieval/rsum": 1.0}, {"iteration": 19, "retrieval/rsum": 2.0}])
    text = draw_curves({"m": [a, str(tmp_path / "missing.json")]}, str(tmp_path / "p.png"), "t")
    assert text.startswith(f"Validation curves drawn in {tmp_path / 'p.png'}") and "| m | 2.0 (19) | 9 |" in text
    assert draw_curves({"m": [str(tmp_path / "x.json")]}, str(tmp_path / "q.png"), "t").startswith("(no validation curves")


def test_draw_curves_gives_the_plot_its_title_and_axis(tmp_path, monkeypatch):
    import phrasedet.utils.learning_curves as learning_curves

    a = _metrics(tmp_path / "a.json", [{"iteration": 9, "retrieval/rsum": 1.0}])
    drawn = []
    monkeypatch.setattr(learning_curves, "plot_curves", lambda curves, path, title, ylabel: drawn.append((path, title, ylabel)))
    draw_curves({"m": [a]}, "p.png", "the title")
    draw_curves({"m": [a]}, "q.png", "t", ylabel="pointing, strict")
    assert drawn == [("p.png", "the title", "validation rsum"), ("q.png", "t", "pointing, strict")]


def test_the_cnn_argument_and_the_dataset_flags(monkeypatch):
    calls = []
    monkeypatch.setattr(pretrained_cnn_module, "ensure_builtin_cnn", lambda: calls.append(1) or "cache/builtin_cnn/model_final.pth")
    assert pretrained_cnn("none") == "" and pretrained_cnn("my/cnn.pth") == "my/cnn.pth" and calls == []
    assert pretrained_cnn("") == "cache/builtin_cnn/model_final.pth" and calls == [1]  # no argument: the built-in CNN, trained once
    assert dataset_flags(["a", "b"]) == ["--dataset", "a", "--dataset", "b"] and dataset_flags([]) == []


def test_budget_selection_and_the_selected_weights(tmp_path):
    assert budget_opts(3000) == ["SOLVER.MAX_ITER", 3000, "SOLVER.STEPS", "(1500,)", "SOLVER.CHECKPOINT_PERIOD", 3000]
    assert selection_opts("v", 100) == ["PHRASEDET.SELECTION.DATASET", "v", "PHRASEDET.SELECTION.PERIOD", 100,
                                        "PHRASEDET.SELECTION.METRIC", "retrieval/rsum"]
    with pytest.raises(FileNotFoundError) as error:
        selected_weights(str(tmp_path))
    assert str(error.value) == f"{tmp_path} has no selection.json and no model_final.pth: train that run first (list its model in --models)"
    (tmp_path / "model_final.pth").write_bytes(b"")
    assert selected_weights(str(tmp_path)) == str(tmp_path / "model_final.pth")
    (tmp_path / "selection.json").write_text(json.dumps({"metric": "retrieval/rsum", "mode": "max", "value": 1.0, "iteration": 9,
                                                         "stage": "train", "weights": "./out/run/model_best.pth"}))
    assert selected_weights(str(tmp_path)) == str(tmp_path / "model_best.pth")  # a relative record: in the run's folder
    elsewhere = tmp_path / "kept" / "model_0000999.pth"  # an absolute record: where it says
    (tmp_path / "selection.json").write_text(json.dumps({"metric": "retrieval/rsum", "mode": "max", "value": 1.0, "iteration": 9,
                                                         "stage": "train", "weights": str(elsewhere)}))
    assert selected_weights(str(tmp_path)) == str(elsewhere)


def test_phases_join_end_to_end_and_draw_curves_reads_each_run_s_phases(tmp_path):
    assert join_phases([[(0, 1.0), (4, 2.0)], [], [(0, 3.0), (2, 4.0)]]) == [(0, 1.0), (4, 2.0), (5, 3.0), (7, 4.0)]
    assert join_phases([[], []]) == []
    adam, sgd = tmp_path / "a.json", tmp_path / "b.json"
    adam.write_text(json.dumps({"iteration": 149, "phrase_detection/loc_acc": 60.0}) + "\n")
    sgd.write_text(json.dumps({"iteration": 9, "phrase_detection/loc_acc": 62.5}) + "\n")
    text = draw_curves({"cite": [[str(adam), str(sgd)], [str(tmp_path / "none.json")]]}, str(tmp_path / "c.png"), "t",
                       "phrase_detection/loc_acc", 1.0, "loc")
    assert "| cite | 62.5 (159) | 159 |" in text and os.path.isfile(tmp_path / "c.png")


def test_a_tie_reports_the_earliest_best_point():
    curves = {"m": [[(100, 5.0), (200, 7.0), (300, 7.0), (400, 6.0)]]}
    assert format_plateaus(curves, 0).splitlines()[2] == "| m | 7.0 (200) | 200 |"


def test_on_the_project_s_records_the_table_s_best_point_is_the_model_selection_kept():
    """Every recorded single-stage run of results/: the curve's best point in the table is the
    snapshot its run selected (a strictly better value replaces the best; a tie keeps the earlier)."""
    import glob

    root = os.path.join(os.path.dirname(__file__), "..", "results")
    checked = ties = 0
    for sel_file in sorted(glob.glob(os.path.join(root, "*_compare", "*", "seed*", "*", "selection.json"))):
        sel = json.load(open(sel_file))
        metrics = os.path.join(os.path.dirname(sel_file), "metrics.json")
        if sel["stage"] != "train" or not os.path.isfile(metrics):
            continue
        curve = read_curve(metrics, sel["metric"])
        best = max(v for _, v in curve)
        ties += sum(v == best for _, v in curve) > 1
        cell = format_plateaus({"m": [curve]}, 5).splitlines()[2].split(" | ")[1]
        assert cell == f"{sel['value']:.1f} ({sel['iteration']})", sel_file
        checked += 1
    assert checked >= 80 and ties > 0, (checked, ties)  # 84 runs, 7 of them with a tie for the best, at 8db6c9f


def test_read_curve_reads_past_a_blank_line(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"iteration": 9, "retrieval/rsum": 1.0}) + "\n\n" + json.dumps({"iteration": 19, "retrieval/rsum": 2.0}) + "\n")
    assert read_curve(str(path)) == [(9, 1.0), (19, 2.0)]


def test_the_table_s_every_line_and_a_run_without_points():
    table = format_plateaus({"m": [[(100, 5.0), (200, 7.0)], []]}, 1)
    assert table.splitlines() == ["| model | best validation value (iteration), per run | flattened at (within 1), per run |",
                                  "|---|---|---|", "| m | 7.0 (200), - | 200, -1 |"]


def test_the_picture_draws_each_model_s_mean_and_range_with_its_labels(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    from PIL import Image

    figures, close = [], plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    # a model without points is skipped, not the end of the models; the band is the second line's (its own colour,
    # not the first colour of the patches' cycle)
    curves = {"vsepp": [[(100, 30.0), (200, 31.0)]], "none": [[]],
              "vse0": [[(100, 50.0), (200, 60.0), (300, 1.0)], [(100, 40.0), (200, 70.0)]]}
    path = plot_curves(curves, str(tmp_path / "new" / "c.png"), "the title")
    assert Image.open(path).size == (900, 550)  # 9 x 5.5 in at 100 dpi, in a folder made for it
    ax = figures[0].axes[0]
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("the title", "iteration", "validation rsum")
    vsepp, vse0 = ax.get_lines()
    assert list(vse0.get_xdata()) == [100, 200] and list(vse0.get_ydata()) == [45.0, 65.0]  # the iterations both runs have
    assert list(vsepp.get_ydata()) == [30.0, 31.0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["vsepp (1 run)", "vse0 (2 runs)"]
    assert {t.get_fontsize() for t in ax.get_legend().get_texts()} == {8.0}
    band, = ax.collections  # only vse0 has a range: its min and max at each iteration
    assert band.get_alpha() == 0.15 and tuple(band.get_facecolor()[0][:3]) == pytest.approx(
        __import__("matplotlib.colors").colors.to_rgb(vse0.get_color()))
    ys = sorted({round(float(y), 6) for y in band.get_paths()[0].vertices[:, 1]})
    assert ys == [40.0, 50.0, 60.0, 70.0]
    assert ax.xaxis._major_tick_kw.get("gridOn") or any(l.get_visible() for l in ax.get_xgridlines())
    assert {line.get_alpha() for line in ax.get_xgridlines()} == {0.3}
    close("all")
    plot_curves(curves, str(tmp_path / "y.png"), "t", ylabel="validation loc. acc. (%)")
    assert figures[1].axes[0].get_ylabel() == "validation loc. acc. (%)"


def test_half_gain_by_hand_and_on_the_project_s_recorded_sum_curves():
    assert half_gain_iteration([[(99, 10.0), (199, 12.0), (299, 30.0), (399, 50.0)],
                                [(99, 10.0), (199, 14.0), (299, 20.0), (399, 50.0), (499, 60.0)]]) == 399  # mean 10, 13, 25, 50
    assert half_gain_iteration([]) == -1 and math.isnan(half_gain([])[1])
    assert half_gain([[(99, 10.0), (199, 30.0)]]) == (199, 20.0)
    assert half_gain([[(1, 0.0), (2, 5.0), (3, 10.0)]]) == (2, 5.0)  # exactly half-way counts as reached
    # on the recorded dsve_loc_sum runs (cnn, 3 seeds), against the obvious loop over their mean
    files = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "results", "pointing_compare", "cnn", "seed*", "dsve_loc_sum", "metrics.json")))
    assert len(files) == 3
    curves = [dict(read_curve(f)) for f in files]
    iters = sorted(set(curves[0]) & set(curves[1]) & set(curves[2]))
    mean = [sum(c[i] for c in curves) / 3 for i in iters]
    half = mean[0] + (max(mean) - mean[0]) / 2
    first = next(i for i, m in zip(iters, mean) if m >= half)
    assert half_gain_iteration([read_curve(f) for f in files]) == first == 799
    assert half_gain([read_curve(f) for f in files])[1] == pytest.approx(half) and 300 < half < 305
