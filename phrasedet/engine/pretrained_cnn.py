"""The built-in pretrained CNN, trained once and cached like the built-in dataset: the stand-in
for ImageNet weights that the retrieval and pointing comparisons start from.

:func:`ensure_builtin_cnn` trains ``configs/pretraining/builtin_cnn.yaml`` (a
``MultiLabelImageClassifier`` on the built-in pretraining split, about 20 minutes on 2 cores)
into ``<cache>/builtin-cnn-<key>/`` on first use and returns its ``model_final.pth``, whose
``backbone.*`` tensors any config with the same backbone loads with
``MODEL.RETRIEVAL.BACKBONE_WEIGHTS``. The machinery (the key, the lock, the folder renamed into
place, ``results.json`` with the label AUCs on the pretraining split's validation images) is the
one every built-in pretrained model shares: :mod:`.pretrained_models`.
"""
from typing import Optional, Sequence

from .pretrained_models import BUILTIN_MODELS, builtin_model_dir, ensure_builtin_model

__all__ = ["BUILTIN_CNN_CONFIG", "builtin_cnn_dir", "ensure_builtin_cnn"]

BUILTIN_CNN_CONFIG = BUILTIN_MODELS["builtin_cnn"].config


def builtin_cnn_dir(cache_dir: Optional[str] = None, config: str = BUILTIN_CNN_CONFIG, opts: Sequence[str] = ()) -> str:
    """``<cache>/builtin-cnn-v<GENERATOR_VERSION>-<16 hex digits>``: the folder of the CNN that
    ``config`` with ``opts`` trains."""
    return builtin_model_dir("builtin_cnn", cache_dir, config, opts)


def ensure_builtin_cnn(cache_dir: Optional[str] = None, config: str = BUILTIN_CNN_CONFIG, opts: Sequence[str] = ()) -> str:
    """The cached CNN's ``model_final.pth``, trained on first use (see the module docstring)."""
    return ensure_builtin_model("builtin_cnn", cache_dir, config, opts)
