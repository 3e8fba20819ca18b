"""Model selection on a validation split with Detectron2's own hooks (paper 003's released CITE
code keeps the model with the best validation phrase-localization accuracy).

A stage trained with a :class:`Selection` evaluates its validation split every ``period``
iterations and at its end (Detectron2's ``EvalHook``, on ``DATASETS.TEST`` = the validation
split), and Detectron2's ``BestCheckpointer`` saves ``model_best.pth`` whenever the criterion
(a key of the flattened results, e.g. ``phrase_detection/loc_acc``) beats the best so far.
:class:`RecordedBestCheckpointer` adds two things to it:

* it can start from the best of an earlier stage (the released code's SGD phase starts from the
  best Adam model and keeps it unless it does better), so a later stage that never improves
  keeps pointing at the earlier stage's weights;
* it writes the best so far to ``<stage>/selection.json`` (value, iteration, stage, weights), so
  the recipe knows which weights to test and ``--resume`` in the middle of a stage goes on
  comparing against the best before the interruption.

Candidates are the periodic evaluations only (as the released code evaluates after each epoch of
training); the starting point of a stage is not one.

Early stopping (``Selection.patience`` = p > 0, the released CITE code's rule with p = 5 epochs):
once p evaluations in a row have not beaten the best so far, the stage stops (:class:`EarlyStop`,
caught by the stage's trainer, :mod:`.staged.stages`) and records where in ``<stage>/early_stop.json``;
its budget (``MAX_ITER``) is then a cap. An evaluation that only ties the best does not beat it.
``--resume`` counts the evaluations since the best from the stage's ``metrics.json``.
"""
import json
import logging
import math
import os
from dataclasses import dataclass
from typing import Callable, Optional, Union

from detectron2.engine.hooks import BestCheckpointer
from detectron2.utils import comm

from phrasedet.fileio import check_record, load_json_file

__all__ = ["EARLY_STOP_FILE", "SELECTION_FILE", "EarlyStop", "RecordedBestCheckpointer", "Selection", "read_selection",
           "read_early_stop"]

logger = logging.getLogger("phrasedet.stages")

SELECTION_FILE = "selection.json"
EARLY_STOP_FILE = "early_stop.json"
_RECORD_KEYS = {"metric": "str", "mode": "str", "value": "finite", "iteration": "int", "stage": "str", "weights": "str"}


@dataclass(frozen=True)
class Selection:
    """How a stage selects its model.

    Attributes:
        dataset: the validation split evaluated (a registered dataset name).
        period: evaluate (and maybe checkpoint) every ``period`` iterations, and at the end.
        metric: the criterion, a key of Detectron2's flattened results ("phrase_detection/loc_acc").
        mode: "max" or "min".
        patience: stop after this many evaluations in a row without a new best; 0 = never.
    """

    dataset: str
    period: int
    metric: str = "phrase_detection/loc_acc"
    mode: str = "max"
    patience: int = 0

    def __post_init__(self):
        if self.mode not in ("max", "min"):
            raise ValueError(f"selection mode must be 'max' or 'min', got {self.mode!r}")
        if self.period <= 0:
            raise ValueError(f"selection period must be > 0, got {self.period}")
        if self.patience < 0:
            raise ValueError(f"selection patience must be >= 0, got {self.patience}")


class EarlyStop(Exception):
    """Raised by :class:`RecordedBestCheckpointer` to end a stage whose patience ran out."""


def read_early_stop(stage_dir: str) -> Optional[dict]:
    """``<stage_dir>/early_stop.json`` ({"iteration", "evaluations_without_gain", "patience"}), or
    None when the stage ran its whole budget."""
    path = os.path.join(stage_dir, EARLY_STOP_FILE)
    if not os.path.isfile(path):
        return None
    return check_record(load_json_file(path), {"iteration": "int", "evaluations_without_gain": "int", "patience": "int"}, path)


def _evaluations_after(metrics_file: str, metric: str, iteration: int) -> int:
    """How many records of ``metric`` a Detectron2 ``metrics.json`` holds after ``iteration``."""
    if not os.path.isfile(metrics_file):
        return 0
    with open(metrics_file, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    return sum(1 for r in records if metric in r and int(r["iteration"]) > iteration)


def read_selection(stage_dir: str) -> Optional[dict]:
    """The record a :class:`RecordedBestCheckpointer` wrote in ``stage_dir``, or None when there is
    none (no evaluation finished yet). A damaged record is an error naming the file and key."""
    path = os.path.join(stage_dir, SELECTION_FILE)
    if not os.path.isfile(path):
        return None
    record = load_json_file(path)
    check_record(record, _RECORD_KEYS, path)
    return record


class RecordedBestCheckpointer(BestCheckpointer):
    """Detectron2's ``BestCheckpointer`` (``model_best.pth`` in the stage folder) that starts from
    ``initial`` (a :func:`read_selection` record of an earlier stage or of this stage before an
    interruption) and records the best so far in ``<stage_dir>/selection.json``.

    Args:
        selection: the :class:`Selection` (its period must be the ``EvalHook``'s).
        checkpointer: the trainer's checkpointer (saves into ``stage_dir``).
        stage_dir: the stage folder.
        stage_name: written in the record.
        initial: the best to beat (a record), or a callable returning it (or None), asked before
            training starts.
    """

    def __init__(self, selection: Selection, checkpointer, stage_dir: str, stage_name: str,
                 initial: Union[None, dict, Callable[[], Optional[dict]]] = None):
        super().__init__(selection.period, checkpointer, selection.metric, selection.mode)
        self._selection, self._dir, self._stage = selection, stage_dir, stage_name
        self._initial = initial
        self._record = None
        self.evaluations_without_gain = 0

    def before_train(self):
        """Start from the initial record (asked now, once the trainer knows whether it resumed) and
        write it, so a fresh run never leaves an older run's record behind."""
        stale = os.path.join(self._dir, EARLY_STOP_FILE)
        if self.trainer.start_iter == 0 and comm.is_main_process() and os.path.isfile(stale):
            os.remove(stale)  # an earlier run's, in a folder trained again from the start
        initial = self._initial() if callable(self._initial) else self._initial
        if initial is not None:
            if initial["metric"] != self._selection.metric or initial["mode"] != self._selection.mode:
                raise ValueError(f"cannot go on selecting by {self._selection.metric} ({self._selection.mode}) from a "
                                 f"record of {initial['metric']} ({initial['mode']})")
            self.best_metric, self.best_iter, self._record = initial["value"], initial["iteration"], dict(initial)
            logger.info("Selecting by %s: the model to beat is %s (%.4f, iteration %d of %s)", self._selection.metric,
                        initial["weights"], initial["value"], initial["iteration"], initial["stage"])
        self._write()
        if self.trainer.start_iter > 0:  # resumed: the evaluations of this stage since its best
            own = self._record is not None and self._record["stage"] == self._stage
            self.evaluations_without_gain = _evaluations_after(os.path.join(self._dir, "metrics.json"), self._selection.metric,
                                                               self._record["iteration"] if own else -1)

    def after_step(self):
        """Detectron2's check of the latest evaluation, then the patience rule (the main process
        decides for all)."""
        super().after_step()
        next_iter = self.trainer.iter + 1
        if self._selection.patience <= 0 or next_iter % self._period or next_iter == self.trainer.max_iter:
            return
        if comm.all_gather(self.evaluations_without_gain >= self._selection.patience)[0]:
            if comm.is_main_process():
                with open(os.path.join(self._dir, EARLY_STOP_FILE), "w", encoding="utf-8") as f:
                    json.dump({"iteration": int(self.trainer.iter), "evaluations_without_gain": self.evaluations_without_gain,
                               "patience": self._selection.patience}, f, indent=1)
            raise EarlyStop(f"{self._stage}: {self.evaluations_without_gain} evaluations without a better "
                            f"{self._selection.metric} than {self.best_metric:.4f} (iteration {self.best_iter})")

    def _best_checking(self):
        before = (self.best_iter, self.best_metric)
        seen = self.trainer.storage.latest().get(self._val_metric) is not None
        super()._best_checking()
        if seen:
            gained = (self.best_iter, self.best_metric) != before
            self.evaluations_without_gain = 0 if gained else self.evaluations_without_gain + 1
        if (self.best_iter, self.best_metric) != before:
            self._record = {"metric": self._selection.metric, "mode": self._selection.mode, "value": float(self.best_metric),
                            "iteration": int(self.best_iter), "stage": self._stage,
                            "weights": os.path.join(self._dir, f"{self._file_prefix}.pth")}
            self._write()

    def _write(self) -> None:
        path = os.path.join(self._dir, SELECTION_FILE)
        if not comm.is_main_process():
            return
        if self._record is None:
            if os.path.isfile(path):
                os.remove(path)
            return
        assert math.isfinite(self._record["value"])
        os.makedirs(self._dir, exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(self._record, f, indent=1)
        os.replace(path + ".tmp", path)
