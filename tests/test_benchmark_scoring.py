"""tools/benchmarks/benchmark_scoring.py: every classifier and the cascade run at tiny sizes; the table's ratios;
the per-image FLOP counts by hand and against the operations the classifiers actually run."""
import argparse
import importlib.util

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from .tool_runs import tool_path

_spec = importlib.util.spec_from_file_location("benchmark_scoring", tool_path("benchmark_scoring.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

TINY = dict(region_dim=12, phrase_dim=10, hidden=8, embed=6, joint=8, concept=4, concepts=2)


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
        assert clf.options["num_concepts"] == TINY["concepts"]


def test_table_ratios_are_to_the_matrix_product_and_rates_to_the_gemm_rate():
    args = argparse.Namespace(sizes="builtin", phrases=5000, regions=300, batch=650, repeats=2)
    table = [("matrix product", 0.0, 0.010, 0.5, 1e9), ("CITEClassifier", 0.002, 0.050, 1.25, 6e9)]
    text = bench.format_table(args, table, gemm_gflops=150.0)
    rows = [line for line in text.splitlines() if line.startswith("| CITEClassifier")]
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    # 6 GFLOP in 50 ms: 120 GFLOP/s, 80 % of 150
    assert cells == ["CITEClassifier", "2.0", "50.0", "5.0", "6.0", "120.0", "80.0 %", "1.25"]
    header = [c.strip() for c in text.splitlines()[2].strip("|").split("|")]
    assert header[4:7] == ["GFLOP per image", "GFLOP/s", "of matrix-product rate"]
    assert text.startswith("5000 phrases x 300 regions, D_r 261, D_t 100")
    # the baseline's rows are the batch's pairs, capped: 650 x 300 > 16,384
    assert "[16384, 100] @ [100, 256] of the same run): 150.0 GFLOP/s" in text


def test_cite_flop_count_equals_a_hand_computation():
    # region branch: 2 * 5 * (12 * 8 + 8 * 6) = 1440; 15 pairs: 2 * 15 * (6 * 8 + 8 * 8 + 8) = 3600
    assert bench.scoring_flops("CITEClassifier", TINY, phrases=3, regions=5) == 1440 + 3600
    # cascade k = 2: CCA shortlist (k_cca = 10) 2 * 5 * 12 * 10 + 2 * 3 * 5 * 10 = 1500; 6 pairs: 1440
    assert bench.scoring_flops("CITEClassifier", TINY, phrases=3, regions=5, cascade=2) == 1500 + 1440 + 1440
    assert bench.scoring_flops("CITEClassifier", TINY, phrases=3, regions=5, cascade=9) == 1500 + 1440 + 3600
    assert bench.scoring_flops("QARCNNClassifier", TINY, phrases=3, regions=5) == 2 * 15 * 12
    with pytest.raises(KeyError, match="no FLOP count for classifier 'Nope'"):
        bench.scoring_flops("Nope", TINY, 3, 5)


@pytest.mark.parametrize("name", bench.CLASSIFIERS)
def test_flop_count_equals_the_matrix_products_scoring_runs(name):
    """torch's FLOP counter over one ``score_encoded`` call (all phrases, all regions) sees exactly
    the counted products: the folded CITE does only the necessary work."""
    torch.manual_seed(0)
    clf = bench.build(name, TINY)
    regions, phrases = torch.randn(5, TINY["region_dim"]), torch.randn(3, TINY["phrase_dim"])
    with torch.no_grad():
        codes = clf.encode_phrases(phrases)
        with FlopCounterMode(display=False) as counter:
            clf.score_encoded(regions, codes)
    assert counter.get_total_flops() == bench.scoring_flops(name, TINY, phrases=3, regions=5)


def test_the_phrase_filter_row_is_measured_and_compared_with_cite():
    args = argparse.Namespace(filter_sentences=300, filter_dim=8, filter_top_n=5, phrases=50)
    result = bench.measure_filter(args, repeats=1, images=3)
    assert result["filter"] > 0 and result["matmul"] > 0 and 0 <= result["kept"] <= 1
    text = bench.format_filter(args, {"filter": 0.002, "matmul": 0.0005, "kept": 0.25}, cite_seconds=0.5)
    assert "2.0 ms (4.0x the product [1, d] @ [d, M], 0.50 ms)" in text
    assert "so the filter costs 0.40 % of it (25.0 % of the random vocabulary kept)" in text
