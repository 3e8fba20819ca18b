"""A ``tools/train_net.py`` run that keeps its best model on a validation split
(``PHRASEDET.SELECTION``), with the shared stage mechanism of :mod:`.stages`.

The run is one :class:`~.stages.Stage` in ``OUTPUT_DIR`` itself: it evaluates
``SELECTION.DATASET`` every ``SELECTION.PERIOD`` iterations and at its end, Detectron2's
``BestCheckpointer`` keeps ``model_best.pth`` (recorded in ``selection.json``), and the validation
curve is in ``metrics.json`` like every other logged value. The selected model, not the last
one, is then tested on ``DATASETS.TEST``. ``--resume`` goes on comparing against the best before
an interruption; a finished run only tests.

:func:`selection_of` also gives paper 001's two stages (:mod:`.retrieval_stages`) their selection.
"""
import logging
import os
from typing import Optional

from ..model_selection import Selection
from .stages import Stage, evaluate_weights, run_stages, stage_config

__all__ = ["selection_of", "run_selected"]

logger = logging.getLogger("phrasedet.stages")


def selection_of(cfg) -> Optional[Selection]:
    """``PHRASEDET.SELECTION`` as a :class:`Selection`, or None when off (no DATASET)."""
    s = cfg.PHRASEDET.SELECTION
    return Selection(s.DATASET, s.PERIOD, s.METRIC, s.MODE, s.PATIENCE) if s.DATASET else None


def run_selected(cfg, resume: bool = False):
    """Train ``cfg`` selecting on its validation split, then test the selected model.

    Returns:
        (the tested model, the test results, the selected weights' path).
    """
    selection = selection_of(cfg)
    if selection is None:
        raise ValueError("run_selected needs PHRASEDET.SELECTION.DATASET")
    c = stage_config(cfg, "", evaluate=False, selection=selection)
    c.defrost()
    c.MODEL.WEIGHTS = cfg.MODEL.WEIGHTS  # one stage: it starts from the run's weights
    c.PHRASEDET.WEIGHTS.PRETRAINED_PARTS = cfg.PHRASEDET.WEIGHTS.PRETRAINED_PARTS
    c.freeze()
    stage = Stage("train", c, cfg.PHRASEDET.SOLVER.OPTIMIZER, selection=selection)
    run_stages([stage], resume, evaluate_last=False)
    weights = stage.selected_weights
    logger.info("Selected %s on %s (%s): testing it", weights, selection.dataset, selection.metric)
    model, results = evaluate_weights(stage, weights, cfg)
    return model, results, os.path.abspath(weights)
