"""Optimizers for every family: Detectron2's SGD, or Adam (VSE++, paper 000, paper 003's CITE
code), with optional clipping of the global gradient norm (VSE++: 2.0).

Detectron2's ``SOLVER.CLIP_GRADIENTS`` clips each parameter tensor on its own; VSE++ clips the
norm of all gradients together (``torch.nn.utils.clip_grad_norm_`` over the model), which is
``PHRASEDET.SOLVER.CLIP_GLOBAL_NORM``.

A module with an ``lr_factor`` attribute (paper 001's word-embedding layer, learning-rate
multiplier 1e-3 in its code) has its parameters' learning rate multiplied by it.
"""
import torch
from detectron2.solver import build_optimizer as build_detectron2_optimizer
from detectron2.solver.build import maybe_add_gradient_clipping

__all__ = ["OPTIMIZERS", "apply_lr_factors", "build_optimizer", "with_global_norm_clipping"]

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


def apply_lr_factors(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> torch.optim.Optimizer:
    """Move the parameters of every module of ``model`` with an ``lr_factor`` attribute into
    param groups of their own, with the group's learning rate times that factor (the learning-rate
    schedule, built afterwards, scales from there)."""
    factors = {id(p): float(m.lr_factor) for m in model.modules() if hasattr(m, "lr_factor") for p in m.parameters()}
    factors = {k: f for k, f in factors.items() if f != 1.0}
    if not factors:
        return optimizer
    for group in list(optimizer.param_groups):
        by_factor = {}
        for p in group["params"]:
            by_factor.setdefault(factors.get(id(p), 1.0), []).append(p)
        group["params"] = by_factor.pop(1.0, [])
        for factor, params in by_factor.items():
            optimizer.add_param_group({**{k: v for k, v in group.items() if k != "params"}, "params": params,
                                       "lr": group["lr"] * factor})
    optimizer.param_groups[:] = [g for g in optimizer.param_groups if g["params"]]
    return optimizer


def build_optimizer(cfg, model, name: str = None, weight_decay: float = None) -> torch.optim.Optimizer:
    """The optimizer ``name`` (default ``PHRASEDET.SOLVER.OPTIMIZER``) over the trainable parameters.

    SGD is Detectron2's (``SOLVER.*``). Adam takes ``SOLVER.BASE_LR`` and, as its L2 term,
    ``weight_decay`` (default ``SOLVER.WEIGHT_DECAY``). Both get ``SOLVER.CLIP_GRADIENTS`` and
    ``PHRASEDET.SOLVER.CLIP_GLOBAL_NORM``; modules' ``lr_factor`` (:func:`apply_lr_factors`).
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
    return with_global_norm_clipping(apply_lr_factors(optimizer, model), cfg.PHRASEDET.SOLVER.CLIP_GLOBAL_NORM)
