"""run_selected (phrasedet/engine/staged/selected_training.py) in this process, where a mutation
run can trace it (tests/test_retrieval_train_net.py runs it through tools/train_net.py in a child
process): it returns the model selected on validation, tested on the test split, starts from
MODEL.WEIGHTS with its PRETRAINED_PARTS checked, and a resumed finished run only tests."""
import json
import os

import pytest
import torch

from phrasedet.engine.comparison.protocol import config_of
from phrasedet.engine.optimizer import build_optimizer
from phrasedet.engine.staged import stages
from phrasedet.engine.staged.selected_training import run_selected
from phrasedet.modeling.checkpoint.load_report import PretrainedPartError

CONFIG = os.path.join(os.path.dirname(__file__), "..", "configs", "retrieval", "vse0.yaml")


@pytest.fixture(scope="module")
def features(oracle_global):
    return oracle_global


def _cfg(features, output_dir, *opts):
    return config_of(CONFIG, ["MODEL.RETRIEVAL.IMAGE_INPUT", "features", "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR", features,
                              "MODEL.RETRIEVAL.EMBED_DIM", 64, "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1, "DATALOADER.NUM_WORKERS", 0,
                              "SOLVER.MAX_ITER", 20, "SOLVER.STEPS", "()", "SOLVER.CHECKPOINT_PERIOD", 1000,
                              "PHRASEDET.SELECTION.DATASET", "builtin_flickr30k_captions_val", "PHRASEDET.SELECTION.PERIOD", 10,
                              "OUTPUT_DIR", output_dir, *opts])


def _state(path):
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def _same_tensors(model, state):
    own = {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    return all(torch.equal(v.cpu(), state[k].cpu()) for k, v in own.items())


def test_without_a_validation_split_it_refuses_to_run(features, tmp_path):
    cfg = _cfg(features, str(tmp_path), "PHRASEDET.SELECTION.DATASET", "")
    with pytest.raises(ValueError) as error:
        run_selected(cfg)
    assert str(error.value) == "run_selected needs PHRASEDET.SELECTION.DATASET"


def test_it_tests_the_selected_snapshot_and_a_resumed_finished_run_only_tests(features, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative OUTPUT_DIR: the returned path is absolute
    model, results, weights = run_selected(_cfg(features, "run"))
    selection = json.loads((tmp_path / "run" / "selection.json").read_text())
    assert weights == str(tmp_path / "run" / "model_best.pth") and os.path.abspath(selection["weights"]) == weights
    assert selection["stage"] == "train"  # the stage's name, which show_records.py prints beside the iteration
    assert _same_tensors(model, _state(weights))  # the model tested is the selected file (model_best.pth)
    metrics = (tmp_path / "run" / "metrics.json").read_text()
    curve = {r["iteration"]: r["retrieval/rsum"] for r in map(json.loads, metrics.splitlines()) if "retrieval/rsum" in r}
    assert sorted(curve) == [9, 20] and selection["value"] == pytest.approx(max(curve.values()))
    # the last validation runs after training, at MAX_ITER; the results are the test split's, not validation's
    assert set(results) == {"retrieval"} and results["retrieval"]["rsum"] != pytest.approx(selection["value"])
    again, again_results, again_weights = run_selected(_cfg(features, "run"), resume=True)
    assert (tmp_path / "run" / "metrics.json").read_text() == metrics  # neither trained nor validated again
    assert again_weights == weights and again_results["retrieval"] == pytest.approx(results["retrieval"])
    # without resume (the default) the finished run is trained again: its validations are logged again;
    # with the config's optimizer (Base-Retrieval.yaml: Adam), not the stages' default, SGD
    built = []

    def spy(cfg, model, name=None, weight_decay=None):
        optimizer = build_optimizer(cfg, model, name, weight_decay)
        built.append(isinstance(optimizer, torch.optim.Adam))
        return optimizer
    monkeypatch.setattr(stages, "build_optimizer", spy)
    run_selected(_cfg(features, "run"))
    assert built == [True]
    again_curve = [r["iteration"] for r in map(json.loads, (tmp_path / "run" / "metrics.json").read_text().splitlines())
                   if "retrieval/rsum" in r]
    assert again_curve == [9, 20, 9, 20]


def test_it_starts_from_model_weights_and_checks_their_pretrained_parts(features, tmp_path):
    first = tmp_path / "first"
    _, _, weights = run_selected(_cfg(features, str(first)))
    start = _state(weights)
    # learning rate 0: the selected model is the one it started from, MODEL.WEIGHTS
    frozen, _, _ = run_selected(_cfg(features, str(tmp_path / "from_weights"), "MODEL.WEIGHTS", weights, "SOLVER.BASE_LR", 0.0))
    assert _same_tensors(frozen, start)
    partial = tmp_path / "no_text.pth"
    torch.save({"model": {k: v for k, v in start.items() if not k.startswith("sentence_encoder.")}}, partial)
    with pytest.raises(PretrainedPartError, match="sentence_encoder"):
        run_selected(_cfg(features, str(tmp_path / "partial"), "MODEL.WEIGHTS", str(partial),
                          "PHRASEDET.WEIGHTS.PRETRAINED_PARTS", ["sentence_encoder"]))
