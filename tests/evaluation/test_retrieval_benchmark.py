"""tools/benchmarks/benchmark_retrieval.py at a tiny scale: the lines it prints, and (b) == (c)."""
import numpy as np
import pytest

from .retrieval_toy import load_tool


@pytest.fixture(scope="module")
def tool():
    return load_tool("benchmark_retrieval")


def test_prints_times_ratios_and_equal_metrics(tool, capsys):
    results = tool.main(["--images", "200", "--dim", "64", "--signal", "0.3", "--repeat", "1"])["evaluation"]
    out = capsys.readouterr().out
    for line in ("== evaluation: 200 images x 1,000 captions (5 per image), d = 64",
                 "(a) one matrix product [200, 64] @ [64, 1000]", "(b) evaluate_retrieval (chunk 1024)",
                 "(c) released VSE++ loop", "peak RSS", "ratio (b)/(a) = ", "ratio (c)/(b) = ",
                 "metrics (b) vs (c): equal; queries tied with their ground truth: 0"):
        assert line in out, line
    assert results["equal"] and results["tied_queries"] == 0
    m = results["metrics"]
    assert 0 < m["i2t_R@1"] < 100 and 0 < m["t2i_R@1"] < 100  # the planted signal is neither absent nor perfect


def test_embeddings_lie_on_the_exact_grid(tool):
    images, captions, c2i = tool.planted_embeddings(50, 5, 32, signal=0.3, seed=1)
    assert images.dtype == captions.dtype == np.float32 and c2i.tolist() == np.repeat(np.arange(50), 5).tolist()
    for x in (images, captions):
        assert np.array_equal(x * 4096, np.round(x * 4096)) and (np.linalg.norm(x, axis=1) < 1).all()


def test_the_reference_loop_follows_its_description(tool):
    # 2 images x 2 captions; image 0 ranks its captions [1, 2, 0, 3]: best own caption (0 or 1) at 0-based 0
    images = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    captions = np.array([[0.9, 0.1], [1.0, 0.0], [0.8, 0.0], [0.5, 0.4]], np.float32)
    m, i2t, t2i = tool.vsepp_loop(images, captions, per_image=2)
    # i2t 0-based: image 0 -> 0; image 1 ranks [3 (0.4), 0 (0.1), 1, 2] -> 0. t2i: captions 0-1 -> 0,
    # caption 2 (0.8 vs 0.0) -> image 1 at 1, caption 3 (0.5 vs 0.4) -> image 1 at 1
    assert (m["i2t_R@1"], m["t2i_R@1"], m["t2i_medr"], m["t2i_meanr"]) == (100.0, 50.0, 1.0, 1.5)


def test_the_comparison_fails_on_an_untied_difference(tool, capsys):
    m = {"i2t_R@1": 50.0, "i2t_meanr": 1.5}
    ours = (np.array([1, 2]), np.array([3]))
    ref0 = (np.array([0, 1]), np.array([1]))  # 0-based: caption 0 ranked 2nd by (c), 3rd by (b)
    tied = (np.zeros(2, bool), np.array([True]))
    assert tool.compare_with_reference(m, m, ours, ref0, tied) == {"equal": True, "tied_queries": 1}
    with pytest.raises(AssertionError, match="untied query"):
        tool.compare_with_reference(m, m, ours, ref0, (np.zeros(2, bool), np.array([False])))
    with pytest.raises(AssertionError, match="not pessimistic"):  # (b) better than (c) on a tie
        tool.compare_with_reference(m, m, (np.array([1, 2]), np.array([1])), ref0, tied)


@pytest.mark.usefixtures("builtin_root")
def test_encoding_section_prints_rates_next_to_the_plain_modules(tool, capsys):
    import os

    config = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "retrieval", "vsepp.yaml")
    results = tool.main(["--sections", "encoding", "--config-file", config, "--encode-batch", "2", "--repeat", "1"])["encoding"]
    out = capsys.readouterr().out
    assert "== encoding" in out and "plain Detectron2 backbone" in out and "plain torch.nn.GRU, pre-tokenized" in out
    assert set(results) == {"images", "captions"}
    assert all(r["per_second"] > 0 and r["baseline_per_second"] > 0 for r in results.values())


@pytest.mark.usefixtures("builtin_root")
def test_stages_section_times_both_stages_next_to_vsepp(tool, capsys):
    import os

    configs = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "retrieval")
    results = tool.main(["--sections", "stages", "--config-file", os.path.join(configs, "vsepp.yaml"), "--instance-config",
                         os.path.join(configs, "instance_loss.yaml"), "--stage-batch", "2", "--repeat", "1"])["stages"]
    out = capsys.readouterr().out
    assert "stage I on features (CNN frozen)" in out and "VSE++ with res4 fine-tuned" in out
    assert set(results) == {"stage1_features", "vsepp_features", "stage1_pixels", "stage2", "vsepp_ft"}
    assert all(ms > 0 for ms in results.values())
