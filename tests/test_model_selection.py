"""Model selection on validation (phrasedet/engine/model_selection.py): Detectron2's EvalHook and
BestCheckpointer keep the model of the best validation criterion; a later phase starts from an
earlier phase's best; a resumed run goes on comparing with the best before the interruption."""
import json

import pytest
import torch
from detectron2.checkpoint import DetectionCheckpointer
from detectron2.engine import SimpleTrainer
from detectron2.engine.hooks import EvalHook
from torch import nn

from phrasedet.engine.model_selection import SELECTION_FILE, RecordedBestCheckpointer, Selection, read_selection
from phrasedet.fileio import BadFileError


class _Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(2))

    def forward(self, data):
        return {"loss": ((self.w - 1.0) ** 2).sum()}


def _run(tmp_path, planted, period=2, initial=None, name="phase"):
    """Train a toy model ``period * len(planted)`` iterations; the k-th validation returns
    planted[k]. Returns (the weights seen at each validation, the hook)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    model = _Toy()
    trainer = SimpleTrainer(model, iter([None] * 1000), torch.optim.SGD(model.parameters(), lr=0.1))
    seen = []

    def validate():
        seen.append(model.w.detach().clone())
        return {"phrase_detection": {"loc_acc": planted[len(seen) - 1]}}

    selection = Selection("val", period)
    best = RecordedBestCheckpointer(selection, DetectionCheckpointer(model, save_dir=str(tmp_path)), str(tmp_path), name, initial)
    trainer.register_hooks([EvalHook(period, validate), best])
    trainer.train(0, period * len(planted))
    return seen, best


def _saved(tmp_path, name="model_best.pth"):
    return torch.load(tmp_path / name, weights_only=False)


def test_the_model_of_the_planted_best_validation_is_kept(tmp_path):
    seen, _ = _run(tmp_path, [20.0, 70.0, 50.0, 60.0])  # best at the 2nd validation: iteration 3 (0-based), 4 steps in
    record = read_selection(str(tmp_path))
    assert record == {"metric": "phrase_detection/loc_acc", "mode": "max", "value": 70.0, "iteration": 3, "stage": "phase",
                      "weights": str(tmp_path / "model_best.pth")}
    saved = _saved(tmp_path)
    assert saved["iteration"] == 3
    assert torch.equal(saved["model"]["w"], seen[1]) and not torch.equal(seen[1], seen[3])


def test_ties_keep_the_earlier_model_and_min_mode_keeps_the_lowest(tmp_path):
    _run(tmp_path / "tie", [50.0, 50.0])
    assert read_selection(str(tmp_path / "tie"))["iteration"] == 1  # not strictly better: not saved again
    model = _Toy()
    trainer = SimpleTrainer(model, iter([None] * 10), torch.optim.SGD(model.parameters(), lr=0.1))
    values = iter([3.0, 1.0, 2.0])
    best = RecordedBestCheckpointer(Selection("val", 1, "loss", "min"), DetectionCheckpointer(model, save_dir=str(tmp_path)),
                                    str(tmp_path), "m")
    trainer.register_hooks([EvalHook(1, lambda: {"loss": next(values)}), best])
    trainer.train(0, 3)
    assert read_selection(str(tmp_path))["value"] == 1.0 and read_selection(str(tmp_path))["iteration"] == 1


def test_a_later_phase_keeps_the_earlier_best_unless_it_beats_it(tmp_path):
    _run(tmp_path / "adam", [40.0, 80.0])
    adam = read_selection(str(tmp_path / "adam"))
    _run(tmp_path / "sgd", [75.0, 79.0], initial=lambda: read_selection(str(tmp_path / "adam")), name="sgd")
    assert read_selection(str(tmp_path / "sgd")) == adam  # never better: the Adam model stays the selected one
    assert not (tmp_path / "sgd" / "model_best.pth").exists()
    seen, _ = _run(tmp_path / "sgd2", [75.0, 81.0], initial=adam, name="sgd2")
    record = read_selection(str(tmp_path / "sgd2"))
    # the last validation runs after training (Detectron2's EvalHook.after_train): the trainer's iteration is then 4
    assert (record["value"], record["iteration"], record["stage"]) == (81.0, 4, "sgd2")
    assert torch.equal(_saved(tmp_path / "sgd2")["model"]["w"], seen[1])


def test_a_fresh_run_removes_an_older_record_and_other_criteria_are_refused(tmp_path):
    _run(tmp_path, [10.0])
    assert read_selection(str(tmp_path))["value"] == 10.0
    _run(tmp_path, [float("nan")])  # a fresh run whose only validation gave no number: no record of the older run
    assert read_selection(str(tmp_path)) is None
    other = {"metric": "phrase_detection/mAP", "mode": "max", "value": 1.0, "iteration": 0, "stage": "x", "weights": "w.pth"}
    with pytest.raises(ValueError, match="cannot go on selecting by phrase_detection/loc_acc"):
        _run(tmp_path, [10.0], initial=other)


def test_a_damaged_record_names_the_file_and_key(tmp_path):
    (tmp_path / SELECTION_FILE).write_text(json.dumps({"metric": "m", "mode": "max", "value": "high", "iteration": 1,
                                                       "stage": "s", "weights": "w"}))
    with pytest.raises(BadFileError, match=r"selection\.json.*'value'"):
        read_selection(str(tmp_path))


def test_a_selection_needs_a_positive_period_and_a_known_mode():
    with pytest.raises(ValueError, match="period must be > 0"):
        Selection("val", 0)
    with pytest.raises(ValueError, match="mode must be 'max' or 'min'"):
        Selection("val", 1, mode="best")
