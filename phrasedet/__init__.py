"""phrasedet: phrase detection and grounding models for Detectron2.

Importing the package registers its datasets, its models and the ``phrasedet://`` addresses of the
built-in pretrained models' weights (:mod:`.builtin_weights`).
"""
from . import builtin_weights, data, modeling  # noqa: F401  (registration by import side effect)
from .config import add_phrasedet_config

__version__ = "0.1.0"
