"""Issue 43's cold-start study (phrasedet/engine/comparison/cold_start.py, tools/compare/compare_pointing.py
--study cold_start): each variant's overrides, the warm-up chosen from the sum's curves, the all-equal loss
share, and which runs the study asks for (train_net replaced by a fake)."""
import importlib.util
import json
import os

import pytest

from phrasedet.engine.comparison import cold_start
from phrasedet.engine.comparison.protocol import config_of
from .tool_runs import tool_path

ROOT = os.path.join(os.path.dirname(__file__), "..")
DSVE = os.path.join(ROOT, "configs", "pointing", "dsve_loc.yaml")


def test_the_paper_s_halvings_end_epochs_2_to_6_of_the_built_in_split():
    assert cold_start.paper_lr_steps(600, 64) == [19, 28, 38, 47, 56]  # 9.375 iterations an epoch
    assert cold_start.paper_lr_steps(600, 160) == [8, 11, 15, 19, 22]


@pytest.mark.parametrize("name, key, value", [
    ("batch160", "SOLVER.IMS_PER_BATCH", 160), ("gru", "MODEL.RETRIEVAL.RNN.TYPE", "gru"),
    ("no_pooled_dropout", "MODEL.RETRIEVAL.POOLED_DROPOUT", 0.0),
    ("warmup_half_gain", "MODEL.RETRIEVAL.LOSS.WARMUP_ALL_NEGATIVES_ITERS", 800)])
def test_each_variant_changes_one_thing_of_dsve_loc(name, key, value):
    opts = cold_start.variant_opts(name, 600, 64, 800)
    cfg, base = config_of(DSVE, opts), config_of(DSVE)
    got = cfg
    for part in key.split("."):
        got = getattr(got, part)
    assert got == value and cfg != base
    assert cfg.SOLVER.BASE_LR == base.SOLVER.BASE_LR and cfg.MODEL.RETRIEVAL.LOSS.NEGATIVES == "hardest"


def test_the_paper_lr_variant_and_an_unknown_one():
    cfg = config_of(DSVE, cold_start.variant_opts("paper_lr", 600, 64, 0))
    assert (cfg.SOLVER.BASE_LR, cfg.SOLVER.GAMMA, tuple(cfg.SOLVER.STEPS)) == (1e-3, 0.5, (19, 28, 38, 47, 56))
    with pytest.raises(KeyError, match=r"no cold-start variant 'lstm' \(known: warmup_half_gain, batch160, paper_lr, gru, "
                                       r"no_pooled_dropout\)"):
        cold_start.variant_opts("lstm", 600, 64, 0)


def test_the_all_equal_share_of_the_last_tenth_by_hand(tmp_path):
    path = tmp_path / "metrics.json"
    losses = {19: 40.0, 39: 30.0, 79: 26.0, 89: 25.6, 100: 12.8}  # the last tenth: iterations 90 and later
    path.write_text("".join(json.dumps({"iteration": i, "total_loss": v}) + "\n" for i, v in losses.items()))
    assert cold_start.all_equal_ratio(str(path), 0.2, 64) == pytest.approx(12.8 / 25.6)
    assert cold_start.all_equal_ratio(str(path), 0.2, 64, last_share=0.2) == pytest.approx((25.6 + 12.8) / 2 / 25.6)
    path.write_text("".join(json.dumps({"iteration": i, "total_loss": v}) + "\n" for i, v in ((49, 99.0), (50, 20.0), (100, 0.0))))
    assert cold_start.all_equal_ratio(str(path), 0.2, 64, last_share=0.5) == pytest.approx(10.0 / 25.6)  # 50 is in the half
    path.write_text(json.dumps({"iteration": 1, "retrieval/rsum": 3.0}) + "\n")
    with pytest.raises(ValueError, match="metrics.json: no total_loss logged"):
        cold_start.all_equal_ratio(str(path), 0.2, 64)


def test_the_format_says_which_runs_left_the_plateau_by_their_validation_not_their_loss():
    row = {"seed": 0, "change": "SOLVER.IMS_PER_BATCH 160", "best": 472.04, "best_iteration": 2599, "i2t_R@1": 44.7,
           "t2i_R@1": 32.4, "pointing": 54.8, "ratio": 1.02}
    table = cold_start.format_study({"batch160": [row], "dsve_loc": [{**row, "best": 143.0, "change": "none"}],
                                     "edge": [{**row, "best": 302.1}]}, 302.1)
    assert table.splitlines()[:2] == [
        "| model | seed | change | best val. rsum (iteration) | i2t R@1 | t2i R@1 | R@1 summed | pointing, strict "
        "| loss / all-equal, last tenth | left the plateau (best val. rsum >= 302.1) |", "|---|" + "---|" * 9]
    assert table.splitlines()[2] == ("| batch160 | 0 | SOLVER.IMS_PER_BATCH 160 | 472.0 (2599) | 44.7 | 32.4 | 77.1 | 54.8 | "
                                     "1.020 | yes |")
    assert table.splitlines()[3].endswith("| 1.020 | no |") and table.splitlines()[4].endswith("| yes |")


def _load_tool():
    spec = importlib.util.spec_from_file_location("compare_pointing", tool_path("compare_pointing.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


@pytest.mark.usefixtures("builtin_root")
def test_the_study_runs_each_variant_after_the_budget_with_the_warm_up_from_the_sum_s_curves(tmp_path, monkeypatch):
    tool = _load_tool()
    calls = []

    def train_run(name, config, out, resume, opts, flags=(), records=None):
        opts = [str(o) for o in opts]
        calls.append((name, os.path.basename(config), out, dict(zip(opts[::2], opts[1::2]))))
        os.makedirs(out, exist_ok=True)
        rise = {"dsve_loc_sum": [100.0, 110.0, 300.0, 400.0]}.get(name, [100.0, 101.0, 102.0, 103.0])
        batch = int(dict(zip(opts[::2], opts[1::2])).get("SOLVER.IMS_PER_BATCH", 64))
        with open(os.path.join(out, "metrics.json"), "w") as f:
            for k, v in enumerate(rise):
                f.write(json.dumps({"iteration": 100 * k + 99, "retrieval/rsum": v, "total_loss": 0.4 * batch}) + "\n")
        with open(os.path.join(out, "selection.json"), "w") as f:
            json.dump({"metric": "retrieval/rsum", "mode": "max", "value": rise[-1], "iteration": 399, "stage": "train",
                       "weights": "w"}, f)
        return {"retrieval": {"i2t_R@1": 4.0, "t2i_R@1": 5.0}, "pointing": {"accuracy": 40.0}}, 1.0

    monkeypatch.setattr(tool, "train_run", train_run)
    monkeypatch.setattr(tool, "oracle_features", lambda root, resume: {"maps": str(tmp_path / "maps")})
    monkeypatch.setattr(tool, "word_vectors_digest", lambda config, opts: "text")
    tool.main(["--output-root", str(tmp_path), "--representations", "oracle", "--seeds", "0", "--study", "cold_start",
               "--budget", "400", "--variants", "warmup_half_gain", "paper_lr", "batch160"])
    names = [c[0] for c in calls]
    # the sum's three seeds (the warm-up and the level), the cold start itself, then the variants
    assert names == ["dsve_loc_sum", "dsve_loc_sum", "dsve_loc_sum", "dsve_loc", "warmup_half_gain", "paper_lr", "batch160"]
    warm = calls[4]
    assert warm[1] == "dsve_loc_warmup.yaml" and warm[2] == str(tmp_path / "oracle" / "cold_start" / "seed0" / "warmup_half_gain")
    assert warm[3]["MODEL.RETRIEVAL.LOSS.WARMUP_ALL_NEGATIVES_ITERS"] == "300"  # the sum is half-way (250) at 299
    assert calls[5][3]["SOLVER.STEPS"] == "(19, 28, 38, 47, 56)" and calls[5][3]["SOLVER.MAX_ITER"] == "400"
    summary = json.loads((tmp_path / "comparison_cold_start.json").read_text())["representations"]["oracle"]
    assert summary["warmup"] == 300 and summary["level"] == 250.0
    assert [r["ratio"] for r in summary["rows"]["batch160"]] == [pytest.approx(1.0)]  # 0.4 x 160 against 2 x 0.2 x 160
    assert not (tmp_path / "comparison.json").exists()
