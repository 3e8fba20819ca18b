"""Keys of every task family: ``add_solver_config`` (optimizer choices Detectron2's yacs config
lacks), ``add_weights_config`` (what ``MODEL.WEIGHTS`` must initialize) and
``add_selection_config`` (keeping the best model on a validation split)."""
from detectron2.config import CfgNode as CN

__all__ = ["add_solver_config", "add_weights_config", "add_selection_config"]


def add_solver_config(cfg):
    """``PHRASEDET.SOLVER``: the optimizer and global gradient-norm clipping."""
    _C = cfg
    _C.PHRASEDET.SOLVER = CN()
    # "SGD" (Detectron2's, with SOLVER.MOMENTUM and WEIGHT_DECAY) or "Adam" (SOLVER.WEIGHT_DECAY as its L2 term; VSE++ and paper 000).
    _C.PHRASEDET.SOLVER.OPTIMIZER = "SGD"
    # Clip the norm of all gradients together to this value (VSE++: 2.0); 0 = off. (SOLVER.CLIP_GRADIENTS clips each tensor separately.)
    _C.PHRASEDET.SOLVER.CLIP_GLOBAL_NORM = 0.0


def add_weights_config(cfg):
    """``PHRASEDET.WEIGHTS``: the model parts ``MODEL.WEIGHTS`` must initialize."""
    _C = cfg
    _C.PHRASEDET.WEIGHTS = CN()
    # Module paths (e.g. "backbone", "proposal_generator", "roi_heads.region_features", "image_encoder.backbone") that the
    # file of MODEL.WEIGHTS must wholly initialize: loading it fails, naming the part and the file, when one of them is
    # left partly or wholly random (the RPN's output layers re-initialized for other anchors excepted), and an empty
    # MODEL.WEIGHTS is an error. [] = no requirement (the built-in configs, which train from scratch).
    _C.PHRASEDET.WEIGHTS.PRETRAINED_PARTS = []


def add_selection_config(cfg):
    """``PHRASEDET.SELECTION``: model selection of a ``tools/train_net.py`` run (retrieval and
    pointing models, and each stage of ``PHRASEDET.RETRIEVAL_STAGES``; paper 003's recipe has its
    own, ``PHRASEDET.RECIPE.SELECTION``)."""
    _C = cfg
    _C.PHRASEDET.SELECTION = CN()
    # Validation split evaluated every PERIOD iterations and at the end of training; the best model on METRIC is the one
    # tested on DATASETS.TEST (model_best.pth, recorded in selection.json; metrics.json holds the curve). "" = off: the
    # last iteration's model is tested (Detectron2's behaviour).
    _C.PHRASEDET.SELECTION.DATASET = ""
    # Iterations between two validations.
    _C.PHRASEDET.SELECTION.PERIOD = 100
    # Criterion: a key of Detectron2's flattened results of DATASET (e.g. "retrieval/rsum").
    _C.PHRASEDET.SELECTION.METRIC = "retrieval/rsum"
    # "max" or "min".
    _C.PHRASEDET.SELECTION.MODE = "max"
    # Stop once this many evaluations in a row bring no better model; 0 = train the whole budget.
    _C.PHRASEDET.SELECTION.PATIENCE = 0
