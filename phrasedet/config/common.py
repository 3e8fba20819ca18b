"""Keys of every task family: ``add_solver_config`` (optimizer choices Detectron2's yacs config
lacks) and ``add_weights_config`` (what ``MODEL.WEIGHTS`` must initialize)."""
from detectron2.config import CfgNode as CN

__all__ = ["add_solver_config", "add_weights_config"]


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
