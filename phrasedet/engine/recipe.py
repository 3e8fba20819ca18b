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
Stages run with the shared mechanism of :mod:`.stages` (``--resume`` continues in the interrupted
stage; a fitted ``cca.npz`` is reused like a finished stage).

With several processes, stages 1, 3 and 4 train with all of them; the main process fits the
CCA (reading the whole training set) while the others wait.
"""
import json
import logging
import os

from detectron2.utils import comm

from phrasedet.modeling.cca_fitting import fit_cca_from_detector, load_cca_layers, save_cca_layers

from .init_comparison import compare_initializations, format_comparison
from .optimizer import OPTIMIZERS
from .stages import Stage, freeze_all_but, load_weights, run_stage, run_stages, stage_config, stage_solver
from .trainer import PhrasedetTrainer

__all__ = [
    "build_recipe_model",
    "cca_path",
    "detector_stage",
    "fit_or_load_cca",
    "random_init_stages",
    "recipe_stages",
    "run_recipe",
]

logger = logging.getLogger("phrasedet.recipe")

STAGE_DIRS = ("stage1_detector", "stage2_cca", "stage3_classifier", "stage4_finetune")
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


def detector_stage(cfg) -> Stage:
    """Stage 1: ``SOLVER.*`` as given, classifier ``RECIPE.DETECTOR_CLASSIFIER``, no cascade."""
    c = stage_config(cfg, STAGE_DIRS[0], evaluate=False)
    c.defrost()
    c.MODEL.PHRASE_ROI_HEADS.CLASSIFIER = cfg.PHRASEDET.RECIPE.DETECTOR_CLASSIFIER
    c.MODEL.PHRASE_ROI_HEADS.CASCADE_TOPK = 0
    c.MODEL.WEIGHTS = cfg.MODEL.WEIGHTS  # e.g. an ImageNet or COCO backbone
    c.freeze()
    return Stage(STAGE_DIRS[0], c)  # SGD: Detectron2's SOLVER.WEIGHT_DECAY


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

    c3 = stage_config(cfg, STAGE_DIRS[2] + suffix, not finetune, **stage_solver(r.CLASSIFIER_ITERS, r.CLASSIFIER_LR, r.CLASSIFIER_STEPS, cfg))
    # Adam as the CITE code, without weight decay (its regularizers are in the losses)
    stages = [Stage(STAGE_DIRS[2] + suffix, c3, r.CLASSIFIER_OPTIMIZER, prepare_classifier, weight_decay=0.0)]
    if finetune:
        def prepare_finetune(model):
            _apply_cca(cfg, model, cca_layers)
            load_weights(model, stages[0].final_weights)

        c4 = stage_config(cfg, STAGE_DIRS[3] + suffix, True, **stage_solver(r.FINETUNE_ITERS, r.FINETUNE_LR, r.FINETUNE_STEPS, cfg))
        stages.append(Stage(STAGE_DIRS[3] + suffix, c4, r.FINETUNE_OPTIMIZER, prepare_finetune, weight_decay=0.0))
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


def build_recipe_model(cfg):
    """The final model of a recipe config, shaped to load its checkpoints (``--eval-only``): the
    classifier's CCA-initialized layers and the cascade's shortlist are sized from the recipe's
    ``stage2_cca/cca.npz``: ``OUTPUT_DIR``'s, else that of the recipe ``MODEL.WEIGHTS`` comes from
    c.MODEL.PHRASE_ROI_HEADS.NPA.ENABLED = False  # NPA trains the stage-3 classifier only
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
        _apply_cca(cfg, model, load_cca_layers(path))
    return model


# ---------------------------------------------------------------- running
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
    model, results = run_stages(stages, resume)
    summary = {"final_model": stages[-1].final_weights, "results": results}
    if r.COMPARE_RANDOM_INIT:
        baseline = random_init_stages(cfg, detector_weights, cca_layers)
        _, random_results = run_stages(baseline, resume)
        summary["random_init"] = {"final_model": baseline[-1].final_weights, "results": random_results}
        if comm.is_main_process():
            summary["comparison"] = _compare_with_random_init(cfg, results, random_results)
    if comm.is_main_process() and results:
        with open(os.path.join(cfg.OUTPUT_DIR, "results.json"), "w") as f:
            json.dump(summary, f, indent=1)
    logger.info("Recipe finished: final model %s; results in %s", stages[-1].final_weights, os.path.join(cfg.OUTPUT_DIR, "results.json"))
    return model, results
