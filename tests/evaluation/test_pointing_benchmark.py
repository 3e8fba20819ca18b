"""tools/benchmarks/benchmark_pointing.py at a tiny scale: the lines it prints and the equal hit counts
(times are printed, never asserted)."""
import numpy as np
import pytest

from .retrieval_toy import load_tool


@pytest.fixture(scope="module")
def tool():
    return load_tool("benchmark_pointing")


def test_evaluation_section_prints_rates_and_ratios(tool, capsys):
    results = tool.main(["--sections", "evaluation", "--images", "30", "--queries", "2000", "--repeat", "1",
                         "--end-to-end"])["evaluation"]
    out = capsys.readouterr().out
    for line in ("== evaluation: 2,000 queries over 30 images (paper: 865,582 over 17,471)",
                 "hit rule strict (x1 < x < x2 and y1 < y < y2); tolerance 15 px",
                 "(a) baseline: one numpy (x > x1) & (x < x2) & (y > y1) & (y < y2)",
                 "(b) point_hits(points, boxes, 'strict')", "(c) evaluate_points",
                 "(d) PointingGameEvaluator.process x 30 + evaluate", "queries/s", "the baseline's time",
                 "strict hits (a) vs (b) vs (c): equal"):
        assert line in out, line
    assert results["same_hits"] and set(results["ratio_to_baseline"]) == {"a", "b", "c", "d"}
    assert results["ratio_to_baseline"]["a"] == 1.0 and results["metrics"]["num_queries"] == 2000
    assert results["end_to_end_metrics"] == results["metrics"]
    assert 0 < results["metrics"]["accuracy_strict"] < results["metrics"]["accuracy_tol15"] < 100


def test_synthetic_split_is_seeded_and_inside_the_images(tool):
    sizes, counts, boxes, points = tool.synthetic_split(20, 500, seed=3)
    again = tool.synthetic_split(20, 500, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip((sizes, counts, boxes, points), again))
    assert counts.sum() == 500 and len(sizes) == 20
    wh = np.repeat(sizes[:, ::-1], counts, axis=0)
    assert (boxes[:, :2] >= 0).all() and (boxes[:, 2:] <= wh).all() and (boxes[:, :2] <= boxes[:, 2:]).all()
    assert (points >= 0).all() and (points <= wh).all()


def test_sections_are_a_dict_of_functions(tool):
    assert set(tool.SECTIONS) == {"evaluation", "heatmap"} and all(callable(f) for f in tool.SECTIONS.values())
    with pytest.raises(SystemExit):
        tool.parse_args(["--sections", "nope"])


def test_heatmap_section_matches_the_released_algorithm_and_prints_ratios(tool, capsys):
    results = tool.main(["--sections", "heatmap", "--maps", "64", "--map-side", "5", "--topk", "7",
                         "--queries-per-image", "6", "--repeat", "1"])["heatmap"]
    out = capsys.readouterr().out
    for line in ("== heatmap: 64 maps of 5 x 5, embedding 64, k = 7, 6 queries per image",
                 "(e) project_maps, once per image", "us per image", "us per query", "the bound's time",
                 "heatmaps equal to the released algorithm's: yes"):
        assert line in out, line
    assert results["same_heatmaps"] and results["ratio_to_bound"]["e_bound"] == 1.0
