"""``add_solver_config``: optimizer choices Detectron2's yacs config lacks, for every task family."""
from detectron2.config import CfgNode as CN

__all__ = ["add_solver_config"]


def add_solver_config(cfg):
    """``PHRASEDET.SOLVER``: the optimizer and global gradient-norm clipping."""
    _C = cfg
    _C.PHRASEDET.SOLVER = CN()
    # "SGD" (Detectron2's, with SOLVER.MOMENTUM and WEIGHT_DECAY) or "Adam" (SOLVER.WEIGHT_DECAY as its L2 term; VSE++ and paper 000).
    _C.PHRASEDET.SOLVER.OPTIMIZER = "SGD"
    # Clip the norm of all gradients together to this value (VSE++: 2.0); 0 = off. (SOLVER.CLIP_GRADIENTS clips each tensor separately.)
    _C.PHRASEDET.SOLVER.CLIP_GLOBAL_NORM = 0.0
