"""Staged training in one command, shared by every family's multi-stage recipe.

A recipe is a list of :class:`Stage`: each has its own frozen config whose ``OUTPUT_DIR`` is a
folder of the run's ``OUTPUT_DIR`` (:func:`stage_config`), an optimizer, and a ``prepare(model)``
step run after the model is built and before the optimizer sees it (load the previous stage's
weights, freeze parts). :func:`run_stages` runs them in order; the last one evaluates.

A stage with a :class:`~.model_selection.Selection` evaluates a validation split periodically
and keeps its best model (``model_best.pth``, recorded in ``selection.json``; it may start from the
best of an earlier stage): :attr:`Stage.selected_weights` is then the model the next stage or the
test starts from, and :func:`evaluate_weights` tests it. With a patience, the stage stops once that
many evaluations in a row bring no better model (``early_stop.json``); it is then finished, as
after its last iteration (its ``model_final.pth`` is the model it stopped with).

``--resume`` semantics (the same for every recipe): a stage whose ``model_final.pth`` exists is
not run again, the interrupted stage continues from its last checkpoint, and the last stage, when
finished, only evaluates (as Detectron2's ``--resume`` does). Without ``--resume`` every stage
starts afresh. Each stage seeds the random generators from ``SEED`` (plus the process rank), so a
stage trains the same whether the stages before it ran in this process or an earlier one.

Users: paper 003's phrase-detection recipe (:mod:`.recipe`) and paper 001's two-stage
instance-loss schedule (:mod:`.instance_recipe`).
"""
import contextlib
import logging
import os
from dataclasses import dataclass
from typing import Callable, Optional

from detectron2.checkpoint import DetectionCheckpointer
from detectron2.engine.hooks import EvalHook
from detectron2.utils import comm
from detectron2.utils.env import seed_all_rng
from torch import nn

from ..model_selection import EarlyStop, RecordedBestCheckpointer, Selection, read_selection
from .model_surgery import freeze_all_but, load_weights
from ..optimizer import build_optimizer
from ..trainer import PhrasedetTrainer

__all__ = ["Selection", "Stage", "evaluate_weights", "freeze_all_but", "load_weights", "run_stage", "run_stages",
           "stage_config", "stage_solver"]

logger = logging.getLogger("phrasedet.stages")


@dataclass
class Stage:
    """One training stage.

    Attributes:
        name: its folder name (under the run's ``OUTPUT_DIR``) and its name in the log.
        cfg: its frozen config (``OUTPUT_DIR`` is the stage folder).
        optimizer: ``"SGD"`` or ``"Adam"`` (:func:`.optimizer.build_optimizer`).
        prepare: ``prepare(model)``, run after building the model and before the optimizer.
        weight_decay: the optimizer's weight decay; ``None`` = ``SOLVER.WEIGHT_DECAY``.
        selection: keep the best model on a validation split (``cfg.DATASETS.TEST`` must be that
            split and ``cfg.TEST.EVAL_PERIOD`` the selection's period: :func:`stage_config`).
        best_to_beat: with ``selection``, a callable returning the record of the best model so far
            of an earlier stage (:func:`~.model_selection.read_selection`), or None.
        extra_hooks: a callable returning more hooks for the stage's trainer (appended last, so
            they see the end of training after every other hook).
    """

    name: str
    cfg: object
    optimizer: str = "SGD"
    prepare: Optional[Callable[[nn.Module], None]] = None
    weight_decay: Optional[float] = None
    selection: Optional[Selection] = None
    best_to_beat: Optional[Callable[[], Optional[dict]]] = None
    extra_hooks: Optional[Callable[[], list]] = None

    @property
    def final_weights(self) -> str:
        """The last iteration's model (its existence marks the stage finished)."""
        return os.path.join(self.cfg.OUTPUT_DIR, "model_final.pth")

    @property
    def selected_weights(self) -> str:
        """The model this stage hands on: the selected one (maybe an earlier stage's) when it selects,
        else :attr:`final_weights`."""
        if self.selection is None:
            return self.final_weights
        record = read_selection(self.cfg.OUTPUT_DIR)
        if record is None:
            raise FileNotFoundError(f"{os.path.join(self.cfg.OUTPUT_DIR, 'selection.json')}: stage {self.name} selected no "
                                    f"model (was it trained? did its validation on {self.selection.dataset} give {self.selection.metric}?)")
        return record["weights"]


def stage_config(cfg, folder: str, evaluate: bool, selection: Optional[Selection] = None, **solver):
    """A frozen copy of ``cfg`` for a stage: ``OUTPUT_DIR/<folder>``, no ``MODEL.WEIGHTS`` and no
    ``PHRASEDET.WEIGHTS.PRETRAINED_PARTS`` (stages load their inputs in ``prepare``), no test splits unless ``evaluate``, ``SOLVER.<key>`` set
    from ``solver``. With a ``selection``, the only split evaluated is its validation split, every
    ``selection.period`` iterations."""
    c = cfg.clone()
    c.defrost()
    c.OUTPUT_DIR = os.path.join(cfg.OUTPUT_DIR, folder)
    c.MODEL.WEIGHTS = ""
    c.PHRASEDET.WEIGHTS.PRETRAINED_PARTS = []
    if not evaluate:
        c.DATASETS.TEST = ()
    if selection is not None:
        c.DATASETS.TEST = (selection.dataset,)
        c.TEST.EVAL_PERIOD = selection.period
    for key, value in solver.items():
        c.SOLVER[key] = value
    c.freeze()
    return c


def stage_solver(iters: int, lr: float, steps, cfg) -> dict:
    """``SOLVER`` keys of a stage trained ``iters`` iterations from ``lr``, decayed at ``steps``
    (warm-up no longer than the stage)."""
    return {"MAX_ITER": iters, "BASE_LR": lr, "STEPS": tuple(steps), "WARMUP_ITERS": min(cfg.SOLVER.WARMUP_ITERS, iters)}


# ---------------------------------------------------------------- running
class _HideEarlyStop(logging.Filter):
    """Detectron2's training loop logs every exception that ends it with its traceback; an
    :class:`EarlyStop` is no failure."""

    def filter(self, record):
        return not (record.exc_info and isinstance(record.exc_info[1], EarlyStop))


@contextlib.contextmanager
def _early_stop_not_logged():
    loop_logger, quiet = logging.getLogger("detectron2.engine.train_loop"), _HideEarlyStop()
    loop_logger.addFilter(quiet)
    try:
        yield
    finally:
        loop_logger.removeFilter(quiet)


def _trainer_class(stage: Stage):
    class StageTrainer(PhrasedetTrainer):
        prebuilt = None  # a model built (and prepared) already, handed to the next build_model call

        @classmethod
        def build_model(cls, cfg):
            if cls.prebuilt is not None:
                model, cls.prebuilt = cls.prebuilt, None
                return model
            model = super().build_model(cfg)
            if stage.prepare is not None:
                stage.prepare(model)
            return model

        @classmethod
        def build_optimizer(cls, cfg, model):
            return build_optimizer(cfg, model, stage.optimizer, weight_decay=stage.weight_decay)

        def build_hooks(self):
            hooks = super().build_hooks()
            if stage.selection is not None:  # Detectron2's BestCheckpointer runs right after the EvalHook it reads
                at = next(i for i, h in enumerate(hooks) if isinstance(h, EvalHook)) + 1
                hooks.insert(at, RecordedBestCheckpointer(stage.selection, self.checkpointer, stage.cfg.OUTPUT_DIR, stage.name,
                                                          self._best_to_beat))
            return hooks + (stage.extra_hooks() if stage.extra_hooks is not None else [])

        def train(self):
            """Detectron2's training; a stage stopped by its patience saves the model it stopped
            with as ``model_final.pth`` (the stage is finished) and returns normally."""
            try:
                with _early_stop_not_logged():
                    return super().train()
            except EarlyStop as stop:
                logger.info("Stage %s: stopped early at iteration %d: %s", stage.name, self.iter, stop)
                self.checkpointer.save("model_final")
                comm.synchronize()
                return None

        def _best_to_beat(self):
            own = read_selection(stage.cfg.OUTPUT_DIR) if self.start_iter > 0 else None  # resumed: the best before
            return own or (stage.best_to_beat() if stage.best_to_beat is not None else None)

    StageTrainer.__name__ = f"{stage.name}_trainer"
    return StageTrainer


def run_stage(stage: Stage, resume: bool, final: bool):
    """Train one stage (or evaluate it when finished and final). Returns (model, results); both
    ``None`` for a finished earlier stage that is skipped."""
    if resume and not final and os.path.isfile(stage.final_weights):
        logger.info("Stage %s: finished before (%s), not run again", stage.name, stage.final_weights)
        return None, None
    if stage.cfg.SEED >= 0:  # each stage starts from its own seed: the same with or without the stages before it
        seed_all_rng(stage.cfg.SEED + comm.get_rank())
    trainer_cls = _trainer_class(stage)
    model = trainer_cls.build_model(stage.cfg)
    if stage.cfg.SOLVER.MAX_ITER == 0 or not any(p.requires_grad for p in model.parameters()):
        logger.info("Stage %s: nothing to train; saving the model as it is", stage.name)
        os.makedirs(stage.cfg.OUTPUT_DIR, exist_ok=True)
        DetectionCheckpointer(model, save_dir=stage.cfg.OUTPUT_DIR).save("model_final")
        comm.synchronize()
        return model, (trainer_cls.test(stage.cfg, model) if final else None)
    trainer_cls.prebuilt = model
    logger.info("Stage %s: training for %d iterations in %s", stage.name, stage.cfg.SOLVER.MAX_ITER, stage.cfg.OUTPUT_DIR)
    trainer = trainer_cls(stage.cfg)
    trainer.resume_or_load(resume=resume)
    trainer.train()
    return getattr(trainer.model, "module", trainer.model), getattr(trainer, "_last_eval_results", None)


def run_stages(stages, resume: bool, evaluate_last: bool = True):
    """Run ``stages`` in order; the last one evaluates unless ``evaluate_last`` is False.
    Returns (its model, its results)."""
    model, results = None, None
    for i, stage in enumerate(stages):
        model, results = run_stage(stage, resume, final=evaluate_last and i == len(stages) - 1)
    return model, results


def evaluate_weights(stage: Stage, weights: str, cfg):
    """Test ``weights`` on ``cfg.DATASETS.TEST`` (outputs in ``cfg.OUTPUT_DIR``): the model is built
    as ``stage`` builds it (its ``prepare``, e.g. CCA-shaped layers), then loaded from ``weights``.
    Returns (model, results)."""
    trainer_cls = _trainer_class(stage)
    model = trainer_cls.build_model(cfg)
    load_weights(model, weights)
    logger.info("Testing %s on %s", weights, ", ".join(cfg.DATASETS.TEST))
    return model, trainer_cls.test(cfg, model)
