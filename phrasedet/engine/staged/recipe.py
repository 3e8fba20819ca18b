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
   With ``RECIPE.SELECTION`` (``Base-Recipe.yaml``: the released CITE code's schedule), the
   validation split is evaluated every ``SELECTION.PERIOD`` iterations and the best model by
   ``SELECTION.METRIC`` (validation localization accuracy) is kept (``model_best.pth``,
   ``selection.json``; :mod:`..model_selection`); ``RECIPE.SECOND_PHASE`` then trains on from it
   in ``stage3b_classifier`` (SGD 5e-6 after Adam 5e-5), keeping it unless it does better on
   validation; the selected model is the one tested.
4. ``stage4_finetune``: every layer fine-tuned for ``RECIPE.FINETUNE_ITERS`` (the paper's last
   stage; the released code stops after stage 3), when that is > 0.

With ``RECIPE.COMPARE_RANDOM_INIT`` (``configs/cite_cca.yaml``), stages 3 and 4 run a second time
with the classifier randomly initialized (same detector, budget and seed; folders
``stage3_classifier_random_init`` ...), both are evaluated, and the log and ``results.json`` say
per bucket whether CCA initialization beat random initialization (``init_comparison.py``).

The last stage's model (the selected one, when stage 3 selects) is tested on ``DATASETS.TEST``;
the earlier ones are not. The final results and the final model's path (and the comparison, when asked) also go to ``<OUTPUT_DIR>/results.json``.
Stages run with the shared mechanism of :mod:`.stages` (``--resume`` continues in the interrupted
stage; a fitted ``cca.npz`` is reused like a finished stage).

With several processes, stages 1, 3 and 4 train with all of them; the main process fits the
CCA (reading the whole training set) while the others wait.
"""
import json
import logging
import os
from typing import Optional

from detectron2.data import DatasetCatalog
from detectron2.utils import comm

from phrasedet.modeling.classifiers import REGION_CLASSIFIER_REGISTRY
from phrasedet.modeling.cca import (fit_cca_from_detector, fit_deep_cca_from_pairs, load_cca_layers, load_deep_cca,
                                    save_cca_layers, save_deep_cca, training_pairs)

from .init_comparison import as_preview, compare_initializations, format_comparison
from ..model_selection import Selection, read_selection
from ..optimizer import OPTIMIZERS
from .baseline_process import join_baseline, start_baseline
from ..hooks import RegionCacheHook
from .stages import Stage, evaluate_weights, freeze_all_but, load_weights, run_stage, run_stages, stage_config, stage_solver
from ..trainer import PhrasedetTrainer

__all__ = [
    "build_recipe_model",
    "CCALayers",
    "cca_path",
    "deep_cca_path",
    "detector_stage",
    "fit_or_load_cca",
    "random_init_stages",
    "recipe_stages",
    "run_recipe",
    "train_and_test",
]

logger = logging.getLogger("phrasedet.recipe")

STAGE_DIRS = ("stage1_detector", "stage2_cca", "stage3_classifier", "stage4_finetune")
STAGE3B_DIR = "stage3b_classifier"  # the second stage-3 phase (RECIPE.SECOND_PHASE)
RANDOM_INIT_SUFFIX = "_random_init"  # folders of the random-init baseline (RECIPE.COMPARE_RANDOM_INIT)


# ---------------------------------------------------------------- configs
def _check(cfg) -> None:
    r = cfg.PHRASEDET.RECIPE
    for key in ("CLASSIFIER_OPTIMIZER", "FINETUNE_OPTIMIZER"):
        if r[key] not in OPTIMIZERS:
            raise ValueError(f"PHRASEDET.RECIPE.{key} must be one of {OPTIMIZERS}, got {r[key]!r}")
    for key in ("CLASSIFIER_ITERS", "FINETUNE_ITERS"):
        if r[key] < 0:
            raise ValueError(f"PHRASEDET.RECIPE.{key} must be >= 0, got {r[key]}")
    classifier = cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER
    if classifier in ("CCAClassifier", "DeepCCAClassifier") and (not r.CCA_INIT or r.COMPARE_RANDOM_INIT):
        raise ValueError(f"MODEL.PHRASE_ROI_HEADS.CLASSIFIER {classifier!r} needs PHRASEDET.RECIPE.CCA_INIT True and "
                         "COMPARE_RANDOM_INIT False (it is the CCA: it has no random initialization)")
    d = cfg.PHRASEDET.DEEP_CCA
    if _needs_deep_cca(cfg) and (d.BATCH_SIZE < 2 or d.ITERS < 0 or d.LR <= 0 or d.RIDGE < 0 or d.OUT_DIM < 0):
        raise ValueError(f"PHRASEDET.DEEP_CCA needs BATCH_SIZE >= 2, ITERS >= 0, LR > 0, RIDGE >= 0 and OUT_DIM >= 0, got "
                         f"{d.BATCH_SIZE}, {d.ITERS}, {d.LR}, {d.RIDGE} and {d.OUT_DIM}")
    if r.COMPARE_RANDOM_INIT and not r.CCA_INIT:
        raise ValueError("PHRASEDET.RECIPE.COMPARE_RANDOM_INIT compares CCA with random initialization: it needs CCA_INIT True")
    if r.COMPARE_RANDOM_INIT and not cfg.DATASETS.TEST:
        raise ValueError("PHRASEDET.RECIPE.COMPARE_RANDOM_INIT needs DATASETS.TEST to evaluate both initializations on")
    if r.DETECTOR_WEIGHTS and not os.path.isfile(r.DETECTOR_WEIGHTS):
        raise FileNotFoundError(f"PHRASEDET.RECIPE.DETECTOR_WEIGHTS: no file {r.DETECTOR_WEIGHTS!r}")


def _check_schedule(cfg) -> None:
    """``RECIPE.SELECTION`` and ``RECIPE.SECOND_PHASE``: errors name the key."""
    r = cfg.PHRASEDET.RECIPE
    s, second = r.SELECTION, r.SECOND_PHASE
    if second.OPTIMIZER not in OPTIMIZERS:
        raise ValueError(f"PHRASEDET.RECIPE.SECOND_PHASE.OPTIMIZER must be one of {OPTIMIZERS}, got {second.OPTIMIZER!r}")
    if second.ITERS < 0:
        raise ValueError(f"PHRASEDET.RECIPE.SECOND_PHASE.ITERS must be >= 0, got {second.ITERS}")
    if not s.DATASET:
        return
    if s.DATASET not in DatasetCatalog.list():
        raise KeyError(f"PHRASEDET.RECIPE.SELECTION.DATASET: {s.DATASET!r} is not a registered dataset")
    if s.PERIOD <= 0:
        raise ValueError(f"PHRASEDET.RECIPE.SELECTION.PERIOD must be > 0, got {s.PERIOD}")
    if s.MODE not in ("max", "min"):
        raise ValueError(f"PHRASEDET.RECIPE.SELECTION.MODE must be 'max' or 'min', got {s.MODE!r}")
    if s.PATIENCE < 0:
        raise ValueError(f"PHRASEDET.RECIPE.SELECTION.PATIENCE must be >= 0, got {s.PATIENCE}")
    if s.VOCABULARY not in ("image", "dataset"):
        raise ValueError(f"PHRASEDET.RECIPE.SELECTION.VOCABULARY must be 'image' or 'dataset', got {s.VOCABULARY!r}")
    if s.DATASET in cfg.DATASETS.TEST:
        logger.warning("PHRASEDET.RECIPE.SELECTION.DATASET %s is also a test split: the model is selected on the data it "
                       "is tested on", s.DATASET)


def _needs_cca(cfg) -> bool:
    return cfg.PHRASEDET.RECIPE.CCA_INIT or cfg.MODEL.PHRASE_ROI_HEADS.CASCADE_TOPK > 0


def _needs_deep_cca(cfg) -> bool:
    return cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER == "DeepCCAClassifier"


def deep_cca_path(cfg) -> str:
    """Where stage 2 writes the Deep CCA (``DeepCCAClassifier`` only): ``<OUTPUT_DIR>/stage2_cca/deep_cca.npz``."""
    return os.path.join(cfg.OUTPUT_DIR, STAGE_DIRS[1], "deep_cca.npz")


class CCALayers(list):
    """Stage 2's stacked CCA layers (a list of ``CCAProjection``), with the Deep CCA (a
    ``DeepCCAProjector``) as ``deep_cca`` when the classifier is ``DeepCCAClassifier``, else None."""

    def __init__(self, layers, deep_cca=None):
        super().__init__(layers)
        self.deep_cca = deep_cca


def cca_path(cfg) -> str:
    """Where stage 2 writes the fitted CCA: ``<OUTPUT_DIR>/stage2_cca/cca.npz``."""
    return os.path.join(cfg.OUTPUT_DIR, STAGE_DIRS[1], "cca.npz")


def detector_stage(cfg) -> Stage:
    """Stage 1: ``SOLVER.*`` as given, classifier ``RECIPE.DETECTOR_CLASSIFIER``, no cascade."""
    c = stage_config(cfg, STAGE_DIRS[0], evaluate=False)
    c.defrost()
    c.MODEL.PHRASE_ROI_HEADS.CLASSIFIER = cfg.PHRASEDET.RECIPE.DETECTOR_CLASSIFIER
    c.MODEL.PHRASE_ROI_HEADS.CASCADE_TOPK = 0
    c.MODEL.PHRASE_ROI_HEADS.NPA.ENABLED = False  # NPA trains the stage-3 classifier only
    c.MODEL.WEIGHTS = cfg.MODEL.WEIGHTS  # e.g. an ImageNet or COCO backbone
    c.PHRASEDET.WEIGHTS.PRETRAINED_PARTS = cfg.PHRASEDET.WEIGHTS.PRETRAINED_PARTS
    c.freeze()
    return Stage(STAGE_DIRS[0], c)  # SGD: Detectron2's SOLVER.WEIGHT_DECAY


def _selection(cfg) -> Optional[Selection]:
    """``RECIPE.SELECTION`` as a :class:`Selection`, or None when off (no DATASET) or when the
    classifier has nothing to train (``trainable = False``: CCA)."""
    s = cfg.PHRASEDET.RECIPE.SELECTION
    if not s.DATASET or not _trainable(cfg):
        return None
    return Selection(s.DATASET, s.PERIOD, s.METRIC, s.MODE, s.PATIENCE)


def _trainable(cfg) -> bool:
    return getattr(REGION_CLASSIFIER_REGISTRY.get(cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER), "trainable", True)


def _validation_config(cfg):
    """``cfg`` evaluating as the validation of a selecting stage does: ``SELECTION.VOCABULARY``, no
    predictions file, no phrase filter or PPA (the criterion is the plain one)."""
    c = cfg.clone()
    c.defrost()
    c.TEST.PHRASE_DETECTION.VOCABULARY = cfg.PHRASEDET.RECIPE.SELECTION.VOCABULARY
    c.TEST.PHRASE_DETECTION.SAVE_PREDICTIONS = False
    c.TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS = c.TEST.PHRASE_FILTER.FILE = ""
    c.TEST.PHRASE_DETECTION.PPA = False
    c.freeze()
    return c


def recipe_stages(cfg, detector_weights: str, cca_layers, suffix: str = "", shared: Optional[dict] = None):
    """Stage 3 (``stage3_classifier<suffix>``, then ``stage3b_classifier<suffix>`` when
    ``SECOND_PHASE.ITERS`` > 0) and stage 4 (``stage4_finetune<suffix>``, when ``FINETUNE_ITERS``
    > 0), given the stage-1 weights and the CCA. With ``RECIPE.SELECTION``, the stage-3 phases
    select on the validation split and hand on their best model (:func:`train_and_test` tests it).
    With ``RECIPE.REGION_CACHE`` the stage-3 phases train on the frozen detector's region features
    computed once (:class:`~.hooks.RegionCacheHook`), kept in ``shared`` for every stage-3
    phase given the same dict."""
    r = cfg.PHRASEDET.RECIPE
    shared = {} if shared is None else shared
    cached = (lambda: [RegionCacheHook(shared)]) if r.REGION_CACHE else None
    finetune = r.FINETUNE_ITERS > 0
    selection = _selection(cfg)
    second = r.SECOND_PHASE.ITERS > 0 and _trainable(cfg)
    same_classifier = r.DETECTOR_CLASSIFIER == cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER
    drop = () if same_classifier else ("roi_heads.classifier.",)
    train_cfg = _validation_config(cfg) if selection else cfg
    evaluate = not finetune and selection is None  # the last stage-3 phase tests its model when it selects none

    def prepare_classifier(model):
        load_weights(model, detector_weights, drop=drop, may_miss=drop + ("roi_heads.shortlist.",))
        _apply_cca(cfg, model, cca_layers)
        freeze_all_but(model, model.roi_heads.classifier)

    c3 = stage_config(train_cfg, STAGE_DIRS[2] + suffix, evaluate and not second, selection,
                      **stage_solver(r.CLASSIFIER_ITERS, r.CLASSIFIER_LR, r.CLASSIFIER_STEPS, cfg))
    # Adam as the CITE code, without weight decay (its regularizers are in the losses)
    stages = [Stage(STAGE_DIRS[2] + suffix, c3, r.CLASSIFIER_OPTIMIZER, prepare_classifier, weight_decay=0.0, selection=selection,
                    extra_hooks=cached)]
    if second:
        first = stages[0]

        def prepare_second(model):
            _apply_cca(cfg, model, cca_layers)  # shapes the CCA layers; the weights come from the first phase
            load_weights(model, first.selected_weights)
            freeze_all_but(model, model.roi_heads.classifier)

        c3b = stage_config(train_cfg, STAGE3B_DIR + suffix, evaluate, selection, **stage_solver(r.SECOND_PHASE.ITERS, r.SECOND_PHASE.LR, [], cfg))
        stages.append(Stage(STAGE3B_DIR + suffix, c3b, r.SECOND_PHASE.OPTIMIZER, prepare_second, weight_decay=0.0, selection=selection,
                            best_to_beat=(lambda: read_selection(first.cfg.OUTPUT_DIR)) if selection else None,
                            extra_hooks=cached))
    if finetune:
        classifier_stage = stages[-1]

        def prepare_finetune(model):
            _apply_cca(cfg, model, cca_layers)
            load_weights(model, classifier_stage.selected_weights)

        c4 = stage_config(cfg, STAGE_DIRS[3] + suffix, True, **stage_solver(r.FINETUNE_ITERS, r.FINETUNE_LR, r.FINETUNE_STEPS, cfg))
        stages.append(Stage(STAGE_DIRS[3] + suffix, c4, r.FINETUNE_OPTIMIZER, prepare_finetune, weight_decay=0.0))
    return stages


def train_and_test(cfg, stages, resume: bool):
    """Run ``stages`` (:func:`recipe_stages`) and test the model they end with on ``DATASETS.TEST``.
    Returns (model, results, path of the tested weights). A last stage that selects on validation
    is tested after training, from its selected weights, with outputs in its folder."""
    last = stages[-1]
    if last.selection is None:
        model, results = run_stages(stages, resume)
        return model, results, last.final_weights
    run_stages(stages, resume, evaluate_last=False)
    weights = last.selected_weights
    record = read_selection(last.cfg.OUTPUT_DIR)  # exists: selected_weights read it
    logger.info("Stage 3 selected %s (%s = %.4f on %s at iteration %d of %s)", weights, record["metric"], record["value"],
                last.selection.dataset, record["iteration"], record["stage"])
    model, results = evaluate_weights(stages[0], weights, stage_config(cfg, os.path.basename(last.cfg.OUTPUT_DIR), True))
    return model, results, weights


def random_init_stages(cfg, detector_weights: str, cca_layers, shared: Optional[dict] = None):
    """The baseline of ``RECIPE.COMPARE_RANDOM_INIT``: stages 3 (and 4) with ``CCA_INIT False``,
    everything else as in ``cfg`` (the cascade's shortlist, when on, is still the CCA)."""
    c = cfg.clone()
    c.defrost()
    c.PHRASEDET.RECIPE.CCA_INIT = False
    c.freeze()
    return recipe_stages(c, detector_weights, cca_layers, suffix=RANDOM_INIT_SUFFIX, shared=shared)


# ---------------------------------------------------------------- model surgery
def _apply_cca(cfg, model, cca_layers) -> None:
    """CCA-initialize the classifier (``RECIPE.CCA_INIT``) and load the cascade's shortlist."""
    heads, n = model.roi_heads, cfg.PHRASEDET.CCA.SCORE_LAYERS
    if cfg.PHRASEDET.RECIPE.CCA_INIT:
        clf = heads.classifier
        if hasattr(clf, "load_deep_cca"):
            if getattr(cca_layers, "deep_cca", None) is None:
                raise ValueError(f"{type(clf).__name__} needs stage 2's Deep CCA ({deep_cca_path(cfg)})")
            clf.load_deep_cca(cca_layers.deep_cca)
        elif hasattr(clf, "init_from_cca"):
            clf.init_from_cca(cca_layers[:2])
        elif hasattr(clf, "load_projection"):
            clf.load_projection(cca_layers[:n])
        else:
            raise ValueError(f"{type(clf).__name__} has no CCA-initialized layers: set PHRASEDET.RECIPE.CCA_INIT False")
    if heads.shortlist is not None:
        heads.shortlist.load_projection(cca_layers[:n])


def build_recipe_model(cfg):
    """The final model of a recipe config, shaped to load its checkpoints (``--eval-only``): the
    classifier's CCA-initialized layers and the cascade's shortlist are sized from the recipe's
    ``stage2_cca/cca.npz``: ``OUTPUT_DIR``'s, else that of the recipe ``MODEL.WEIGHTS`` comes from
    (``<recipe>/stage3_classifier/model_final.pth`` -> ``<recipe>/stage2_cca/cca.npz``)."""
    model = PhrasedetTrainer.build_model(cfg)
    if _needs_cca(cfg):
        candidates = [cca_path(cfg)]
        if cfg.MODEL.WEIGHTS:
            recipe_dir = os.path.dirname(os.path.dirname(os.path.abspath(cfg.MODEL.WEIGHTS)))
            candidates.append(os.path.join(recipe_dir, STAGE_DIRS[1], "cca.npz"))
        path = next((p for p in candidates if os.path.isfile(p)), None)
        if path is None:
            raise FileNotFoundError(f"{' or '.join(candidates)}: the recipe's CCA is needed to shape the model (set OUTPUT_DIR "
                                    "to the recipe's folder, or MODEL.WEIGHTS to a checkpoint of one of its stages)")
        deep = load_deep_cca(os.path.join(os.path.dirname(path), os.path.basename(deep_cca_path(cfg)))) if _needs_deep_cca(cfg) else None
        _apply_cca(cfg, model, CCALayers(load_cca_layers(path), deep))
    return model


# ---------------------------------------------------------------- running
def fit_or_load_cca(cfg, detector_weights: str, resume: bool) -> CCALayers:
    """Stage 2: the stacked CCA of the stage-1 detector (fitted by the main process, saved as
    ``cca.npz``; loaded instead when resuming and the file exists), and for ``DeepCCAClassifier``
    the Deep CCA on the same pairs (``deep_cca.npz``, likewise)."""
    path, deep_path = cca_path(cfg), deep_cca_path(cfg)
    fit_linear = not (resume and os.path.isfile(path))
    fit_deep = _needs_deep_cca(cfg) and not (resume and os.path.isfile(deep_path))
    if not fit_linear:
        logger.info("Stage %s: using the CCA fitted before (%s)", STAGE_DIRS[1], path)
    if _needs_deep_cca(cfg) and not fit_deep:
        logger.info("Stage %s: using the Deep CCA fitted before (%s)", STAGE_DIRS[1], deep_path)
    if fit_linear or fit_deep:
        if comm.is_main_process():
            model = PhrasedetTrainer.build_model(detector_stage(cfg).cfg)
            load_weights(model, detector_weights)
            pairs = training_pairs(cfg, model)  # collected once, for both
            if fit_linear:
                layers = fit_cca_from_detector(cfg, model, pairs)
                save_cca_layers(path, layers)
                logger.info("Stage %s: saved %d CCA layers to %s", STAGE_DIRS[1], len(layers), path)
            if fit_deep:
                save_deep_cca(deep_path, fit_deep_cca_from_pairs(cfg, *pairs))
                logger.info("Stage %s: saved the Deep CCA to %s", STAGE_DIRS[1], deep_path)
        comm.synchronize()
    return CCALayers(load_cca_layers(path), load_deep_cca(deep_path) if _needs_deep_cca(cfg) else None)


def _first_dataset(cfg, results) -> dict:
    """The phrase-detection metrics of ``DATASETS.TEST[0]`` (Detectron2 nests results by dataset
    name when there are several test sets)."""
    results = results.get(cfg.DATASETS.TEST[0], results)
    return results["phrase_detection"]


def _compare_with_random_init(cfg, results, random_results) -> dict:
    comparison = compare_initializations(_first_dataset(cfg, results), _first_dataset(cfg, random_results),
                                         cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER)
    if cfg.PHRASEDET.RECIPE.PREVIEW:
        comparison = as_preview(comparison, cfg.PHRASEDET.RECIPE.CLASSIFIER_ITERS)
    logger.info("CCA initialization vs random initialization of %s (same detector, budget and seed), on %s:\n%s",
                cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER, cfg.DATASETS.TEST[0], format_comparison(comparison))
    return comparison


def run_recipe(cfg, resume: bool = False):
    """Run every stage of the recipe (see the module docstring). Returns (final model, results)."""
    _check(cfg)
    _check_schedule(cfg)
    r = cfg.PHRASEDET.RECIPE
    detector_weights = r.DETECTOR_WEIGHTS
    if detector_weights:
        logger.info("Stage %s: using the trained detector %s", STAGE_DIRS[0], detector_weights)
    else:
        stage1 = detector_stage(cfg)
        run_stage(stage1, resume, final=False)
        detector_weights = stage1.final_weights
    cca_layers = fit_or_load_cca(cfg, detector_weights, resume) if _needs_cca(cfg) else None
    shared = {}  # the region cache of the frozen detector, for every stage-3 phase
    side_by_side = r.COMPARE_RANDOM_INIT and r.BASELINE_PROCESS and comm.get_world_size() == 1
    baseline_process = start_baseline(cfg, detector_weights, resume) if side_by_side else None
    stages = recipe_stages(cfg, detector_weights, cca_layers, shared=shared)
    model, results, final_model = train_and_test(cfg, stages, resume)
    summary = {"final_model": final_model, "results": results}
    if r.COMPARE_RANDOM_INIT:
        if baseline_process is not None:
            random_results, random_model = join_baseline(cfg, baseline_process)
        else:
            baseline = random_init_stages(cfg, detector_weights, cca_layers, shared=shared)
            _, random_results, random_model = train_and_test(cfg, baseline, resume)
        summary["random_init"] = {"final_model": random_model, "results": random_results}
        if comm.is_main_process():
            summary["comparison"] = _compare_with_random_init(cfg, results, random_results)
    if comm.is_main_process() and results:
        with open(os.path.join(cfg.OUTPUT_DIR, "results.json"), "w") as f:
            json.dump(summary, f, indent=1)
    logger.info("Recipe finished: final model %s; results in %s", final_model, os.path.join(cfg.OUTPUT_DIR, "results.json"))
    return model, results
