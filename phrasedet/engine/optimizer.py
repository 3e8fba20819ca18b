"""Optimizers for every family: Detectron2's SGD, or Adam (VSE++, paper 000, paper 003's CITE
code), with optional clipping of the global gradient norm (VSE++: 2.0).

Detectron2's ``SOLVER.CLIP_GRADIENTS`` clips each parameter tensor on its own; VSE++ clips the
norm of all gradients together (``torch.nn.utils.clip_grad_norm_`` over the model), which is
``PHRASEDET.SOLVER.CLIP_GLOBAL_NORM``.
"""
import torch
from detectron2.solver import build_optimizer as build_detectron2_optimizer
from detectron2.solver.build import maybe_add_gradient_clipping

__all__ = ["OPTIMIZERS", "build_optimizer", "with_global_norm_clipping"]

OPTIMIZERS = ("SGD", "Adam")


def with_global_norm_clipping(optimizer: torch.optim.Optimizer, max_norm: float) -> torch.optim.Optimizer:
    """``optimizer`` whose ``step`` first clips the norm of all its parameters' gradients to
    ``max_norm`` (unchanged when ``max_norm`` <= 0)."""
    if max_norm <= 0:
        return optimizer
    base = type(optimizer)

    class GlobalNormClipped(base):
        def step(self, closure=None):
            params = [p for group in self.param_groups for p in group["params"] if p.grad is not None]
            torch.nn.utils.clip_grad_norm_(params, max_norm)
            return super().step(closure)

    GlobalNormClipped.__name__ = f"{base.__name__}WithGlobalNormClipping"
    optimizer.__class__ = GlobalNormClipped
    return optimizer


def build_optimizer(cfg, model, name: str = None, weight_decay: float = None) -> torch.optim.Optimizer:
    """The optimizer ``name`` (default ``PHRASEDET.SOLVER.OPTIMIZER``) over the trainable parameters.

    SGD is Detectron2's (``SOLVER.*``). Adam takes ``SOLVER.BASE_LR`` and, as its L2 term,
    ``weight_decay`` (default ``SOLVER.WEIGHT_DECAY``). Both get ``SOLVER.CLIP_GRADIENTS`` and
    ``PHRASEDET.SOLVER.CLIP_GLOBAL_NORM``.
    """
    name = name or cfg.PHRASEDET.SOLVER.OPTIMIZER
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")
    if name == "SGD":
        optimizer = build_detectron2_optimizer(cfg, model)
    else:
        params = [p for p in model.parameters() if p.requires_grad]
        wd = cfg.SOLVER.WEIGHT_DECAY if weight_decay is None else weight_decay
        optimizer = maybe_add_gradient_clipping(cfg, torch.optim.Adam(params, lr=cfg.SOLVER.BASE_LR, weight_decay=wd))
    return with_global_norm_clipping(optimizer, cfg.PHRASEDET.SOLVER.CLIP_GLOBAL_NORM)
