"""Paper 003's staged recipe in one command (``PHRASEDET.RECIPE``, run by ``tools/train_net.py``).

Each stage works in its own folder of ``OUTPUT_DIR``:

1. ``stage1_detector``: the phrase-aware detector (RPN, phrase-conditioned box regression and
   ``RECIPE.DETECTOR_CLASSIFIER``), trained with ``SOLVER.*``; skipped when
   ``RECIPE.DETECTOR_WEIGHTS`` names a trained one.
2. ``stage2_cca``: stacked CCA fitted over the whole training set with the stage-1 model
   (``cca.npz``), when ``RECIPE.CCA_INIT`` or the cascade needs it.
3. ``stage3_classifier``: ``MODEL.PHRASE_ROI_HEADS.CLASSIFIER`` on the stage-1 detector, which is
   frozen (its BatchNorm layers too), CCA-initialized when ``RECIPE.CCA_INIT``, trained for
   ``RECIPE.CLASSIFIER_ITERS``. When the stage-1 and final classifiers are the same type, the
   stage-1 classifier goes on training. A classifier with nothing to train (CCA) is saved as is.
4. ``stage4_finetune``: every layer fine-tuned for ``RECIPE.FINETUNE_ITERS`` (the paper's last
   stage; the released code stops after stage 3), when that is > 0.

With ``RECIPE.COMPARE_RANDOM_INIT`` (``configs/cite_cca.yaml``), stages 3 and 4 run a second time
with the classifier randomly initialized (same detector, budget and seed; folders
``stage3_classifier_random_init`` ...), both are evaluated, and the log and ``results.json`` say
per bucket whether CCA initialization beat random initialization (``init_comparison.py``).

The last stage evaluates on ``DATASETS.TEST``; the earlier ones do not. The final results and the
final model's path (and the comparison, when asked) also go to ``<OUTPUT_DIR>/results.json``.
With ``--resume`` a finished stage (its ``model_final.pth`` or ``cca.npz`` exists) is not run
again, the interrupted one continues from its last checkpoint, and the last stage, when finished,
only evaluates (as Detectron2's ``--resume`` does). Without ``--resume`` every stage starts afresh.

With several processes, stages 1, 3 and 4 train with all of them; the main process fits the
CCA (reading the whole training set) while the others wait.
"""
import json
import logging
import os
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from detectron2.checkpoint import DetectionCheckpointer
from detectron2.utils import comm
from detectron2.utils.env import seed_all_rng
from torch import nn

from phrasedet.modeling.cca_fitting import fit_cca_from_detector, load_cca_layers, save_cca_layers

from .init_comparison import compare_initializations, format_comparison
from .optimizer import OPTIMIZERS, build_optimizer
from .trainer import PhrasedetTrainer

__all__ = [
    "RecipeStage",
    "build_recipe_model",
    "cca_path",
    "detector_stage",
    "fit_or_load_cca",
    "freeze_all_but",
    "load_weights",
    "random_init_stages",
    "recipe_stages",
    "run_recipe",
    "run_stage",
]

logger = logging.getLogger("phrasedet.recipe")

STAGE_DIRS = ("stage1_detector", "stage2_cca", "stage3_classifier", "stage4_finetune")
RANDOM_INIT_SUFFIX = "_random_init"  # folders of the random-init baseline (RECIPE.COMPARE_RANDOM_INIT)


@dataclass
class RecipeStage:
    """One training stage: its frozen config, the optimizer name and the model preparation
    (``prepare(model)``, run after building the model and before the optimizer sees it)."""

    name: str
    cfg: object
    optimizer: str = "SGD"
    prepare: Optional[Callable[[nn.Module], None]] = None

    @property
    def final_weights(self) -> str:
        return os.path.join(self.cfg.OUTPUT_DIR, "model_final.pth")


# ---------------------------------------------------------------- configs
def _derived(cfg, folder: str, evaluate: bool, **solver):
    c = cfg.clone()
    c.defrost()
    c.OUTPUT_DIR = os.path.join(cfg.OUTPUT_DIR, folder)
    c.MODEL.WEIGHTS = ""  # stages load their inputs in ``prepare``
    if not evaluate:
        c.DATASETS.TEST = ()
    for key, value in solver.items():
        c.SOLVER[key] = value
    c.freeze()
    return c


def _stage_solver(iters: int, lr: float, steps, cfg) -> dict:
    return {"MAX_ITER": iters, "BASE_LR": lr, "STEPS": tuple(steps), "WARMUP_ITERS": min(cfg.SOLVER.WARMUP_ITERS, iters)}


def _check(cfg) -> None:
    r = cfg.PHRASEDET.RECIPE
    for key in ("CLASSIFIER_OPTIMIZER", "FINETUNE_OPTIMIZER"):
        if r[key] not in OPTIMIZERS:
            raise ValueError(f"PHRASEDET.RECIPE.{key} must be one of {OPTIMIZERS}, got {r[key]!r}")
    for key in ("CLASSIFIER_ITERS", "FINETUNE_ITERS"):
        if r[key] < 0:
            raise ValueError(f"PHRASEDET.RECIPE.{key} must be >= 0, got {r[key]}")
    if cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER == "CCAClassifier" and (not r.CCA_INIT or r.COMPARE_RANDOM_INIT):
        raise ValueError("MODEL.PHRASE_ROI_HEADS.CLASSIFIER 'CCAClassifier' needs PHRASEDET.RECIPE.CCA_INIT True and "
                         "COMPARE_RANDOM_INIT False (it is the CCA: it has no random initialization)")
    if r.COMPARE_RANDOM_INIT and not r.CCA_INIT:
        raise ValueError("PHRASEDET.RECIPE.COMPARE_RANDOM_INIT compares CCA with random initialization: it needs CCA_INIT True")
    if r.COMPARE_RANDOM_INIT and not cfg.DATASETS.TEST:
        raise ValueError("PHRASEDET.RECIPE.COMPARE_RANDOM_INIT needs DATASETS.TEST to evaluate both initializations on")
    if r.DETECTOR_WEIGHTS and not os.path.isfile(r.DETECTOR_WEIGHTS):
        raise FileNotFoundError(f"PHRASEDET.RECIPE.DETECTOR_WEIGHTS: no file {r.DETECTOR_WEIGHTS!r}")


def _needs_cca(cfg) -> bool:
    return cfg.PHRASEDET.RECIPE.CCA_INIT or cfg.MODEL.PHRASE_ROI_HEADS.CASCADE_TOPK > 0


def cca_path(cfg) -> str:
    """Where stage 2 writes the fitted CCA: ``<OUTPUT_DIR>/stage2_cca/cca.npz``."""
    return os.path.join(cfg.OUTPUT_DIR, STAGE_DIRS[1], "cca.npz")


def detector_stage(cfg) -> RecipeStage:
    """Stage 1: ``SOLVER.*`` as given, classifier ``RECIPE.DETECTOR_CLASSIFIER``, no cascade."""
    c = _derived(cfg, STAGE_DIRS[0], evaluate=False)
    c.defrost()
    c.MODEL.PHRASE_ROI_HEADS.CLASSIFIER = cfg.PHRASEDET.RECIPE.DETECTOR_CLASSIFIER
    c.MODEL.PHRASE_ROI_HEADS.CASCADE_TOPK = 0
    c.MODEL.WEIGHTS = cfg.MODEL.WEIGHTS  # e.g. an ImageNet or COCO backbone
    c.freeze()
    return RecipeStage(STAGE_DIRS[0], c)


def recipe_stages(cfg, detector_weights: str, cca_layers, suffix: str = ""):
    """Stages 3 and (when ``FINETUNE_ITERS`` > 0) 4, given the stage-1 weights and the CCA, in the
    folders ``stage3_classifier<suffix>`` and ``stage4_finetune<suffix>``."""
    r = cfg.PHRASEDET.RECIPE
    finetune = r.FINETUNE_ITERS > 0
    same_classifier = r.DETECTOR_CLASSIFIER == cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER
    drop = () if same_classifier else ("roi_heads.classifier.",)

    def prepare_classifier(model):
        load_weights(model, detector_weights, drop=drop, may_miss=drop + ("roi_heads.shortlist.",))
        _apply_cca(cfg, model, cca_layers)
        freeze_all_but(model, model.roi_heads.classifier)

    c3 = _derived(cfg, STAGE_DIRS[2] + suffix, not finetune, **_stage_solver(r.CLASSIFIER_ITERS, r.CLASSIFIER_LR, r.CLASSIFIER_STEPS, cfg))
    stages = [RecipeStage(STAGE_DIRS[2] + suffix, c3, r.CLASSIFIER_OPTIMIZER, prepare_classifier)]
    if finetune:
        def prepare_finetune(model):
            _apply_cca(cfg, model, cca_layers)
            load_weights(model, stages[0].final_weights)

        c4 = _derived(cfg, STAGE_DIRS[3] + suffix, True, **_stage_solver(r.FINETUNE_ITERS, r.FINETUNE_LR, r.FINETUNE_STEPS, cfg))
        stages.append(RecipeStage(STAGE_DIRS[3] + suffix, c4, r.FINETUNE_OPTIMIZER, prepare_finetune))
    return stages


def random_init_stages(cfg, detector_weights: str, cca_layers):
    """The baseline of ``RECIPE.COMPARE_RANDOM_INIT``: stages 3 (and 4) with ``CCA_INIT False``,
    everything else as in ``cfg`` (the cascade's shortlist, when on, is still the CCA)."""
    c = cfg.clone()
    c.defrost()
    c.PHRASEDET.RECIPE.CCA_INIT = False
    c.freeze()
    return recipe_stages(c, detector_weights, cca_layers, suffix=RANDOM_INIT_SUFFIX)


# ---------------------------------------------------------------- model surgery
def load_weights(model: nn.Module, path: str, drop=(), may_miss=()) -> None:
    """Load a Detectron2 checkpoint's ``model`` into ``model``, leaving out keys starting with a
    prefix in ``drop``; every other key must match, and only keys under ``may_miss`` may be absent."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    state = state.get("model", state)
    state = {k: v for k, v in state.items() if not k.startswith(tuple(drop))}
    result = model.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys if not k.startswith(tuple(may_miss))]
    if missing or result.unexpected_keys:
        raise ValueError(f"{path} does not fit the model: missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}")
    logger.info("Loaded %d tensors from %s%s", len(state), path, f" (left out {', '.join(drop)})" if drop else "")


def _apply_cca(cfg, model, cca_layers) -> None:
    """CCA-initialize the classifier (``RECIPE.CCA_INIT``) and load the cascade's shortlist."""
    heads, n = model.roi_heads, cfg.PHRASEDET.CCA.SCORE_LAYERS
    if cfg.PHRASEDET.RECIPE.CCA_INIT:
        clf = heads.classifier
        if hasattr(clf, "init_from_cca"):
            clf.init_from_cca(cca_layers[:2])
        elif hasattr(clf, "load_projection"):
            clf.load_projection(cca_layers[:n])
        else:
            raise ValueError(f"{type(clf).__name__} has no CCA-initialized layers: set PHRASEDET.RECIPE.CCA_INIT False")
    if heads.shortlist is not None:
        heads.shortlist.load_projection(cca_layers[:n])


def _keep_eval_mode(module, inputs):
    module.training = False  # a frozen BatchNorm normalizes with, and keeps, its running statistics


def freeze_all_but(model: nn.Module, trainable: nn.Module) -> None:
    """Stop gradients to every parameter outside ``trainable`` and keep the BatchNorm layers
    outside it in inference mode, even under ``model.train()``."""
    keep_params = {id(p) for p in trainable.parameters()}
    keep_modules = {id(m) for m in trainable.modules()}
    for p in model.parameters():
        if id(p) not in keep_params:
            p.requires_grad_(False)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and id(m) not in keep_modules:
            m.register_forward_pre_hook(_keep_eval_mode)


def build_recipe_model(cfg):
    """The final model of a recipe config, shaped to load its checkpoints (``--eval-only``): the
    classifier's CCA-initialized layers and the cascade's shortlist are sized from
    ``<OUTPUT_DIR>/stage2_cca/cca.npz``."""
    model = PhrasedetTrainer.build_model(cfg)
    if _needs_cca(cfg):
        path = cca_path(cfg)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: the recipe's CCA is needed to shape the model (set OUTPUT_DIR to the recipe's folder)")
        _apply_cca(cfg, model, load_cca_layers(path))
    return model


# ---------------------------------------------------------------- running
def _trainer_class(stage: RecipeStage):
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
            # Adam as the CITE code, without weight decay (its regularizers are in the losses)
            return build_optimizer(cfg, model, stage.optimizer, weight_decay=0.0)

    StageTrainer.__name__ = f"{stage.name}_trainer"
    return StageTrainer


def run_stage(stage: RecipeStage, resume: bool, final: bool):
    """Train one stage (or evaluate it when finished and final). Returns (model, results)."""
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


def fit_or_load_cca(cfg, detector_weights: str, resume: bool):
    """Stage 2: the stacked CCA of the stage-1 detector (fitted by the main process, saved as
    ``cca.npz``; loaded instead when resuming and the file exists)."""
    path = cca_path(cfg)
    if resume and os.path.isfile(path):
        logger.info("Stage %s: using the CCA fitted before (%s)", STAGE_DIRS[1], path)
    else:
        if comm.is_main_process():
            model = PhrasedetTrainer.build_model(detector_stage(cfg).cfg)
            load_weights(model, detector_weights)
            layers = fit_cca_from_detector(cfg, model)
            save_cca_layers(path, layers)
            logger.info("Stage %s: saved %d CCA layers to %s", STAGE_DIRS[1], len(layers), path)
        comm.synchronize()
    return load_cca_layers(path)


def _run_stages(stages, resume: bool):
    """Run stages 3 (and 4); the last one evaluates. Returns (its model, its results)."""
    model, results = None, None
    for i, stage in enumerate(stages):
        model, results = run_stage(stage, resume, final=i == len(stages) - 1)
    return model, results


def _first_dataset(cfg, results) -> dict:
    """The phrase-detection metrics of ``DATASETS.TEST[0]`` (Detectron2 nests results by dataset
    name when there are several test sets)."""
    results = results.get(cfg.DATASETS.TEST[0], results)
    return results["phrase_detection"]


def _compare_with_random_init(cfg, results, random_results) -> dict:
    comparison = compare_initializations(_first_dataset(cfg, results), _first_dataset(cfg, random_results),
                                         cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER)
    logger.info("CCA initialization vs random initialization of %s (same detector, budget and seed), on %s:\n%s",
                cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER, cfg.DATASETS.TEST[0], format_comparison(comparison))
    return comparison


def run_recipe(cfg, resume: bool = False):
    """Run every stage of the recipe (see the module docstring). Returns (final model, results)."""
    _check(cfg)
    r = cfg.PHRASEDET.RECIPE
    detector_weights = r.DETECTOR_WEIGHTS
    if detector_weights:
        logger.info("Stage %s: using the trained detector %s", STAGE_DIRS[0], detector_weights)
    else:
        stage1 = detector_stage(cfg)
        run_stage(stage1, resume, final=False)
        detector_weights = stage1.final_weights
    cca_layers = fit_or_load_cca(cfg, detector_weights, resume) if _needs_cca(cfg) else None
    stages = recipe_stages(cfg, detector_weights, cca_layers)
    model, results = _run_stages(stages, resume)
    summary = {"final_model": stages[-1].final_weights, "results": results}
    if r.COMPARE_RANDOM_INIT:
        baseline = random_init_stages(cfg, detector_weights, cca_layers)
        _, random_results = _run_stages(baseline, resume)
        summary["random_init"] = {"final_model": baseline[-1].final_weights, "results": random_results}
        if comm.is_main_process():
            summary["comparison"] = _compare_with_random_init(cfg, results, random_results)
    if comm.is_main_process() and results:
        with open(os.path.join(cfg.OUTPUT_DIR, "results.json"), "w") as f:
            json.dump(summary, f, indent=1)
    logger.info("Recipe finished: final model %s; results in %s", stages[-1].final_weights, os.path.join(cfg.OUTPUT_DIR, "results.json"))
    return model, results
