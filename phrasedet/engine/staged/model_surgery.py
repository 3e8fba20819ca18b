"""Model surgery shared by staged training and the tools that load a trained model's parts:
load a checkpoint leaving out or tolerating named parts, freeze all but one module."""
import logging

from torch import nn

from phrasedet.fileio import BadFileError
from phrasedet.modeling.checkpoint import kept_statistics, load_checkpoint_state

__all__ = ["freeze_all_but", "load_weights"]

logger = logging.getLogger("phrasedet.stages")


def load_weights(model: nn.Module, path: str, drop=(), may_miss=(), keep=()) -> None:
    """Load a Detectron2 checkpoint's ``model`` into ``model``, leaving out keys starting with a
    prefix in ``drop``; every other key must match, and only keys under ``may_miss`` may be absent.
    With ``keep``, only keys under its prefixes take part, in the file and in the model (e.g.
    ``("backbone.", "roi_heads.region_features.")``: the parts region features are computed with).

    Raises ``FileNotFoundError`` for a missing file, and a :class:`~phrasedet.fileio.BadFileError`
    naming the file for one torch cannot read (truncated, corrupt) or whose tensors do not fit.
    """
    state = load_checkpoint_state(path)
    state = {k: v for k, v in state.items() if not k.startswith(tuple(drop)) and (not keep or k.startswith(tuple(keep)))}
    try:  # a FrozenBatchNorm layer the file lacks (a backbone from BACKBONE_WEIGHTS) keeps its statistics
        result = model.load_state_dict(kept_statistics(model, state), strict=False)
    except RuntimeError as e:  # a tensor of another shape
        raise BadFileError(f"{path} does not fit the model: {e}") from None
    missing = [k for k in result.missing_keys if not k.startswith(tuple(may_miss)) and (not keep or k.startswith(tuple(keep)))]
    if missing or result.unexpected_keys:
        raise BadFileError(f"{path} does not fit the model: missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}")
    logger.info("Loaded %d tensors from %s%s", len(state), path, f" (left out {', '.join(drop)})" if drop else "")


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
