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

from phrasedet.engine.model_selection import (EARLY_STOP_FILE, SELECTION_FILE, EarlyStop, RecordedBestCheckpointer, Selection,
                                              read_early_stop, read_selection)
from phrasedet.fileio import BadFileError


class _Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(2))

    def forward(self, data):
        return {"loss": ((self.w - 1.0) ** 2).sum()}


def _run(tmp_path, planted, period=2, initial=None, name="phase", patience=0, start=0, seen=None):
    """Train a toy model from iteration ``start`` to ``start + period * len(planted)``; the k-th
    validation returns planted[k]. Returns (the weights seen at each validation, also appended to
    ``seen``, the hook)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    model = _Toy()
    trainer = SimpleTrainer(model, iter([None] * 1000), torch.optim.SGD(model.parameters(), lr=0.1))
    seen = [] if seen is None else seen

    def validate():
        seen.append(model.w.detach().clone())
        return {"phrase_detection": {"loc_acc": planted[len(seen) - 1]}}

    selection = Selection("val", period, patience=patience)
    best = RecordedBestCheckpointer(selection, DetectionCheckpointer(model, save_dir=str(tmp_path)), str(tmp_path), name, initial)
    trainer.register_hooks([EvalHook(period, validate), best])
    trainer.train(start, start + period * len(planted))
    return seen, best


def _stopped(tmp_path, planted, **kwargs):
    """:func:`_run` that must end by the patience rule: (validations seen, early_stop.json)."""
    seen = []
    with pytest.raises(EarlyStop, match="evaluations without a better phrase_detection/loc_acc"):
        _run(tmp_path, planted, seen=seen, **kwargs)
    return seen, read_early_stop(str(tmp_path))


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


def test_patience_stops_after_that_many_validations_without_a_better_model(tmp_path):
    seen = []
    with pytest.raises(EarlyStop):
        _run(tmp_path, [20.0, 70.0, 50.0, 60.0, 65.0, 80.0, 90.0], patience=3, seen=seen)
    assert len(seen) == 5
    # validations at iterations 1, 3, 5, 7, 9: 50, 60 and 65 bring no better model; 80 is never asked for
    assert read_early_stop(str(tmp_path)) == {"iteration": 9, "evaluations_without_gain": 3, "patience": 3}
    assert read_selection(str(tmp_path))["value"] == 70.0 and read_selection(str(tmp_path))["iteration"] == 3
    seen, _ = _run(tmp_path / "patient", [20.0, 70.0, 50.0, 60.0, 65.0, 80.0, 90.0], patience=4)
    assert len(seen) == 7 and read_early_stop(str(tmp_path / "patient")) is None  # 80 came in time: the whole budget
    assert read_selection(str(tmp_path / "patient"))["value"] == 90.0


def test_a_tie_is_no_gain_min_mode_counts_too_and_patience_zero_never_stops(tmp_path):
    assert _stopped(tmp_path / "tie", [50.0, 50.0, 50.0, 50.0], patience=2)[1]["iteration"] == 5
    model = _Toy()
    trainer = SimpleTrainer(model, iter([None] * 10), torch.optim.SGD(model.parameters(), lr=0.1))
    values = iter([3.0, 1.0, 2.0, 0.5])
    best = RecordedBestCheckpointer(Selection("val", 1, "loss", "min", patience=1),
                                    DetectionCheckpointer(model, save_dir=str(tmp_path)), str(tmp_path), "m")
    trainer.register_hooks([EvalHook(1, lambda: {"loss": next(values)}), best])
    with pytest.raises(EarlyStop):
        trainer.train(0, 10)
    assert read_early_stop(str(tmp_path))["iteration"] == 2 and read_selection(str(tmp_path))["value"] == 1.0
    seen, _ = _run(tmp_path / "never", [50.0] * 6, patience=0)
    assert len(seen) == 6 and not (tmp_path / "never" / EARLY_STOP_FILE).exists()


def test_a_later_phase_counts_its_own_validations_against_the_earlier_best(tmp_path):
    _run(tmp_path / "adam", [40.0, 80.0])
    seen, stop = _stopped(tmp_path / "sgd", [75.0, 79.0, 85.0], initial=read_selection(str(tmp_path / "adam")), name="sgd",
                          patience=2)
    assert len(seen) == 2 and stop["iteration"] == 3
    assert read_selection(str(tmp_path / "sgd"))["stage"] == "phase"  # the Adam model stays the selected one


def test_a_resumed_stage_counts_the_validations_since_its_best_from_its_metrics(tmp_path):
    record = {"metric": "phrase_detection/loc_acc", "mode": "max", "value": 70.0, "iteration": 3, "stage": "phase",
              "weights": str(tmp_path / "model_best.pth")}
    tmp_path.mkdir(exist_ok=True)
    lines = [{"iteration": 1, "phrase_detection/loc_acc": 20.0}, {"iteration": 3, "phrase_detection/loc_acc": 70.0},
             {"iteration": 4, "total_loss": 0.5}, {"iteration": 5, "phrase_detection/loc_acc": 50.0},
             {"iteration": 7, "phrase_detection/loc_acc": 60.0}]
    (tmp_path / "metrics.json").write_text("".join(json.dumps(x) + "\n" for x in lines))
    # two validations since the best before the interruption at 8: one more without gain stops it
    seen, stop = _stopped(tmp_path, [65.0, 99.0], initial=record, patience=3, start=8)
    assert len(seen) == 1 and stop == {"iteration": 9, "evaluations_without_gain": 3, "patience": 3}
    # the same record when it is an earlier phase's: this phase's own validations only (none before 8 here)
    seen, _ = _run(tmp_path / "other", [65.0, 66.0], initial={**record, "stage": "earlier"}, patience=3, start=8)
    assert len(seen) == 2


def test_a_fresh_run_removes_an_older_early_stop_and_bad_patience_or_record_are_named(tmp_path):
    _stopped(tmp_path, [50.0, 50.0, 50.0], patience=1)
    _run(tmp_path, [50.0, 60.0], patience=1)  # the same folder trained again from the start, to its end
    assert read_early_stop(str(tmp_path)) is None
    with pytest.raises(ValueError, match="patience must be >= 0"):
        Selection("val", 1, patience=-1)
    (tmp_path / EARLY_STOP_FILE).write_text(json.dumps({"iteration": 3, "patience": 2}))
    with pytest.raises(BadFileError, match=r"early_stop\.json.*'evaluations_without_gain'"):
        read_early_stop(str(tmp_path))


def test_every_selection_key_of_a_config_reaches_the_selection_the_mode_included():
    import os

    from phrasedet.engine.comparison.protocol import config_of
    from phrasedet.engine.staged.recipe import _selection
    from phrasedet.engine.staged.selected_training import selection_of

    configs = os.path.join(os.path.dirname(__file__), "..", "configs")
    keys = ["DATASET", "builtin_flickr30k_captions_val", "PERIOD", 7, "METRIC", "retrieval/loss", "MODE", "min", "PATIENCE", 3]
    run = config_of(os.path.join(configs, "retrieval", "vse0.yaml"), [f"PHRASEDET.SELECTION.{k}" if i % 2 == 0 else k
                                                                      for i, k in enumerate(keys)])
    assert selection_of(run) == Selection("builtin_flickr30k_captions_val", 7, "retrieval/loss", "min", 3)
    recipe = config_of(os.path.join(configs, "cite_cca.yaml"), [f"PHRASEDET.RECIPE.SELECTION.{k}" if i % 2 == 0 else k
                                                                for i, k in enumerate(keys)])
    assert _selection(recipe) == Selection("builtin_flickr30k_captions_val", 7, "retrieval/loss", "min", 3)
    assert selection_of(config_of(os.path.join(configs, "retrieval", "vse0.yaml"))) is None  # no DATASET: off
    assert _selection(config_of(os.path.join(configs, "cca.yaml"))) is None  # the frozen CCA trains nothing


def _before_train(tmp_path, start_iter, initial=None, lines=None, stage="sgd"):
    """A checkpointer's count of evaluations without gain when its trainer starts at ``start_iter``
    in ``tmp_path``, whose ``metrics.json`` holds ``lines`` (none: no file)."""
    from types import SimpleNamespace

    tmp_path.mkdir(parents=True, exist_ok=True)
    if lines is not None:
        (tmp_path / "metrics.json").write_text("".join(json.dumps(x) + "\n" for x in lines))
    best = RecordedBestCheckpointer(Selection("val", 1, patience=5), DetectionCheckpointer(_Toy(), save_dir=str(tmp_path)),
                                    str(tmp_path), stage, initial)
    best.trainer = SimpleNamespace(start_iter=start_iter)
    best.before_train()
    return best.evaluations_without_gain


def test_what_a_stage_counts_when_it_starts_is_its_own_validations_since_its_best(tmp_path):
    key = "phrase_detection/loc_acc"
    own = {"metric": key, "mode": "max", "value": 70.0, "iteration": 3, "stage": "sgd", "weights": "w"}
    earlier = {**own, "iteration": 11000, "stage": "adam"}
    stale = [{"iteration": i, key: 10.0} for i in (0, 1, 5, 9)]
    assert _before_train(tmp_path / "no_metrics", 8, own) == 0  # resumed, nothing logged yet
    assert _before_train(tmp_path / "fresh", 0, earlier, stale) == 0  # a fresh start never counts an older run's lines
    assert _before_train(tmp_path / "after_one_step", 1, None, [{"iteration": 0, key: 10.0}]) == 1  # resumed after 1 step
    # resumed with the earlier phase's best (iteration 11,000): every validation of this phase counts
    assert _before_train(tmp_path / "earlier_best", 300, earlier, [{"iteration": 149, key: 60.0}, {"iteration": 299, key: 61.0}]) == 2
    assert _before_train(tmp_path / "own_best", 8, own, stale) == 2  # its own best at 3: the lines at 5 and 9


def test_the_patience_rule_is_checked_right_after_each_validation_and_never_at_the_last_step(tmp_path):
    # period 3: validations at iterations 2, 5, 8, 11; no gain at 5 and 8: stopped at 8, the 4th never asked for
    seen, stop = _stopped(tmp_path / "p3", [50.0, 40.0, 40.0, 40.0], patience=2, period=3)
    assert len(seen) == 3 and stop == {"iteration": 8, "evaluations_without_gain": 2, "patience": 2}
    # the patience reached at the last validation, on the last step: the run simply ends (its whole budget)
    seen, _ = _run(tmp_path / "last", [50.0, 40.0, 40.0], patience=2)
    assert len(seen) == 3 and read_early_stop(str(tmp_path / "last")) is None
