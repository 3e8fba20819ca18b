"""Paper 001's two-stage schedule in one command (``PHRASEDET.RETRIEVAL_STAGES``, run by
``tools/train_net.py``), with the shared stage mechanism of :mod:`.stages`.

1. ``stage1_frozen_cnn``: the image CNN frozen (``MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS`` -1:
   no gradient, BatchNorm statistics kept), everything else trained for ``STAGE1_ITERS`` at
   ``STAGE1_LR`` with ``MODEL.RETRIEVAL.LOSS`` weighted by ``STAGE1_LOSS_WEIGHT`` (paper 001: 0,
   the instance loss only). Not evaluated. With ``STAGE1_IMAGE_FEATURES_DIR`` it trains on the
   frozen CNN's precomputed pooled features (``tools/data/extract_image_features.py``; the same
   embeddings as the pixel path, many times faster on a CPU).
2. ``stage2_finetune``: the config as given (``SOLVER.*``, the loss weights, the CNN fine-tuned
   from ``FREEZE_BACKBONE_ITERS``), starting from stage I's weights (the CNN from
   ``MODEL.RETRIEVAL.BACKBONE_WEIGHTS`` when stage I ran on features); evaluated on ``DATASETS.TEST``.

With ``PHRASEDET.SELECTION`` (:mod:`.selected_training`) each stage validates periodically and
keeps its best model: stage II starts from stage I's best, and stage II's best is tested.

``--resume`` continues in the interrupted stage; a finished stage I is not run again.
"""
import logging

from .selected_training import selection_of
from .stages import Stage, evaluate_weights, load_weights, run_stages, stage_config, stage_solver

__all__ = ["retrieval_stages", "run_retrieval_stages"]

logger = logging.getLogger("phrasedet.retrieval_stages")

STAGE_DIRS = ("stage1_frozen_cnn", "stage2_finetune")


def _check(cfg) -> None:
    s = cfg.PHRASEDET.RETRIEVAL_STAGES
    if cfg.MODEL.META_ARCHITECTURE != "ImageTextEmbedding":
        raise ValueError("PHRASEDET.RETRIEVAL_STAGES trains an ImageTextEmbedding model, "
                         f"not MODEL.META_ARCHITECTURE {cfg.MODEL.META_ARCHITECTURE!r}")
    if s.STAGE1_IMAGE_FEATURES_DIR and not (cfg.MODEL.RETRIEVAL.IMAGE_INPUT == "pixels" and cfg.MODEL.RETRIEVAL.BACKBONE_WEIGHTS):
        raise ValueError("PHRASEDET.RETRIEVAL_STAGES.STAGE1_IMAGE_FEATURES_DIR trains stage I on features of the CNN of "
                         "MODEL.RETRIEVAL.BACKBONE_WEIGHTS: set that (the weights the features were extracted with) and "
                         "IMAGE_INPUT 'pixels' for stage II")
    if s.STAGE1_ITERS < 1:
        raise ValueError(f"PHRASEDET.RETRIEVAL_STAGES.STAGE1_ITERS must be >= 1 when ENABLED, got {s.STAGE1_ITERS}")
    i = cfg.MODEL.RETRIEVAL.INSTANCE_LOSS
    if not (s.STAGE1_LOSS_WEIGHT or i.IMAGE_WEIGHT or i.TEXT_WEIGHT):
        raise ValueError("stage I has no loss: PHRASEDET.RETRIEVAL_STAGES.STAGE1_LOSS_WEIGHT and "
                         "MODEL.RETRIEVAL.INSTANCE_LOSS.IMAGE_WEIGHT / TEXT_WEIGHT are all 0")


def retrieval_stages(cfg):
    """[stage I, stage II] of ``cfg`` (see the module docstring)."""
    _check(cfg)
    s, selection = cfg.PHRASEDET.RETRIEVAL_STAGES, selection_of(cfg)
    c1 = stage_config(cfg, STAGE_DIRS[0], evaluate=False, selection=selection,
                      **stage_solver(s.STAGE1_ITERS, s.STAGE1_LR, s.STAGE1_STEPS, cfg))
    c1.defrost()
    c1.MODEL.WEIGHTS = cfg.MODEL.WEIGHTS
    c1.MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS = -1
    c1.MODEL.RETRIEVAL.LOSS.WEIGHT = s.STAGE1_LOSS_WEIGHT
    on_features = bool(s.STAGE1_IMAGE_FEATURES_DIR)
    if not on_features:  # a features model has no CNN for MODEL.WEIGHTS to initialize
        c1.PHRASEDET.WEIGHTS.PRETRAINED_PARTS = cfg.PHRASEDET.WEIGHTS.PRETRAINED_PARTS
    if on_features:
        c1.MODEL.RETRIEVAL.IMAGE_INPUT = "features"
        c1.MODEL.RETRIEVAL.IMAGE_FEATURES_DIR = s.STAGE1_IMAGE_FEATURES_DIR
        c1.TEST.RETRIEVAL.FLIP_AVERAGE = False  # features have no flip
    c1.freeze()
    stage1 = Stage(STAGE_DIRS[0], c1, cfg.PHRASEDET.SOLVER.OPTIMIZER, selection=selection)

    def prepare_finetune(model):
        # a features model has no backbone: the pixel model's comes from BACKBONE_WEIGHTS
        load_weights(model, stage1.selected_weights, may_miss=("image_encoder.backbone.",) if on_features else ())

    c2 = stage_config(cfg, STAGE_DIRS[1], evaluate=selection is None, selection=selection)
    return [stage1, Stage(STAGE_DIRS[1], c2, cfg.PHRASEDET.SOLVER.OPTIMIZER, prepare_finetune, selection=selection)]


def run_retrieval_stages(cfg, resume: bool = False):
    """Run both stages. Returns (final model, stage II's results, the tested weights' path: stage
    II's last, or with ``PHRASEDET.SELECTION`` its best)."""
    stages = retrieval_stages(cfg)
    if selection_of(cfg) is None:
        model, results = run_stages(stages, resume)
        logger.info("Two-stage training finished: final model %s", stages[-1].final_weights)
        return model, results, stages[-1].final_weights
    run_stages(stages, resume, evaluate_last=False)
    weights = stages[-1].selected_weights
    logger.info("Two-stage training finished: testing stage II's best model %s", weights)
    model, results = evaluate_weights(stages[-1], weights, cfg)
    return model, results, weights
