"""tools/benchmarks/benchmark_cca.py at toy sizes: the table it prints, and its agreement with scikit-learn."""
import importlib.util
import os

import numpy as np
import pytest
from .tool_runs import tool_path

ROOT = os.path.join(os.path.dirname(__file__), "..")
TINY = ["--pairs", "3000", "--region-dim", "40", "--phrase-dim", "60", "--phrases", "500", "--batch", "700",
        "--sk-pairs", "1500", "--sk-region-dim", "20", "--sk-phrase-dim", "25", "--sk-phrases", "300", "--threads", "1"]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("_tool_benchmark_cca", tool_path("benchmark_cca.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_prints_the_rows_and_agrees_with_scikit_learn(tool, capsys):
    pytest.importorskip("sklearn")
    results = tool.main(TINY)
    out = capsys.readouterr().out
    for row in ("paper scale: 3,000 pairs, 500 phrases, D_x 40, D_y 60, k 40", "accumulate moments", "fit (covariances + decompositions)",
                "accumulate + fit", "peak RSS", "top canonical correlations", "planted", "vs scikit-learn CCA: 1,500 pairs",
                "ratio sklearn / ours", "correlations sklearn", "max |difference|"):
        assert row in out, row
    paper, sk = results["paper"], results["sklearn"]
    assert 0 < paper["imports_gb"] <= paper["peak_gb"]
    # the planted correlations stand out of the sampling noise (3,000 pairs: loosely recovered)
    np.testing.assert_allclose(paper["correlations"][:len(tool.PLANTED)], tool.PLANTED, atol=0.12)
    assert len(sk["ours_corr"]) == len(sk["sklearn_corr"]) == 4
    assert sk["max_abs_diff"] < 1e-6


def test_planted_pairs_cover_every_phrase_with_zipf_frequencies(tool):
    data = tool.PlantedPairs(num_pairs=5000, region_dim=10, phrase_dim=12, num_phrases=400, seed=0)
    counts = np.bincount(data.phrase_ids, minlength=400)
    assert data.table.shape == (400, 12) and data.table.dtype == np.float32
    assert counts.min() >= 1 and counts[0] > 10 * np.median(counts)  # phrase 0 is the most frequent
    batches = list(data.batches(1200))
    assert [len(ids) for _, ids in batches] == [1200, 1200, 1200, 1200, 200]
    assert batches[0][0].shape == (1200, 10) and batches[0][0].dtype == np.float32


def test_sizes_are_checked(tool):
    with pytest.raises(SystemExit):
        tool.parse_args(["--pairs", "10", "--phrases", "20"])
    with pytest.raises(SystemExit):
        tool.parse_args(["--sk-components", "9"])
