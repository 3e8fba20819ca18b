"""tools/benchmark_scoring.py: every classifier and the cascade run at tiny sizes; the table's ratios."""
import argparse
import importlib.util
import os

import pytest
import torch

_spec = importlib.util.spec_from_file_location("benchmark_scoring", os.path.join(os.path.dirname(__file__), "..", "tools", "benchmark_scoring.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

TINY = dict(region_dim=12, phrase_dim=10, hidden=8, embed=6, joint=8, concept=4)


@pytest.mark.parametrize("name, cascade", [(n, 0) for n in bench.CLASSIFIERS] + [("CITEClassifier", 3)])
def test_each_classifier_is_measured(name, cascade):
    encode, score = bench.measure(name, TINY, phrases=7, regions=5, batch=3, repeats=1, cascade=cascade)
    assert encode >= 0 and score > 0


@pytest.mark.parametrize("name", bench.CLASSIFIERS)
def test_each_row_builds_the_classifier_it_names_at_the_asked_sizes(name):
    clf = bench.build(name, TINY)
    assert type(clf).__name__ == name and not clf.training
    assert clf.encode_phrases(torch.zeros(2, TINY["phrase_dim"])).shape[0] == 2
    if name == "CITEClassifier":
        assert clf.options["joint_dim"] == TINY["joint"] and clf.options["concept_dim"] == TINY["concept"]


def test_table_ratios_are_to_the_matrix_product():
    args = argparse.Namespace(sizes="builtin", phrases=5000, regions=300, batch=650, repeats=2)
    text = bench.format_table(args, [("matrix product", 0.0, 0.010, 0.5), ("CITEClassifier", 0.002, 0.050, 1.25)])
    rows = [line for line in text.splitlines() if line.startswith("| CITEClassifier")]
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells == ["CITEClassifier", "2.0", "50.0", "5.0", "1.25"]
    assert text.startswith("5000 phrases x 300 regions, D_r 261, D_t 100")


def test_the_phrase_filter_row_is_measured_and_compared_with_cite():
    args = argparse.Namespace(filter_sentences=300, filter_dim=8, filter_top_n=5, phrases=50)
    result = bench.measure_filter(args, repeats=1, images=3)
    assert result["filter"] > 0 and result["matmul"] > 0 and 0 <= result["kept"] <= 1
    text = bench.format_filter(args, {"filter": 0.002, "matmul": 0.0005, "kept": 0.25}, cite_seconds=0.5)
    assert "2.0 ms (4.0x the product [1, d] @ [d, M], 0.50 ms)" in text
    assert "so the filter costs 0.40 % of it (25.0 % of the random vocabulary kept)" in text
