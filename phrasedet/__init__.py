"""phrasedet: phrase detection and grounding models for Detectron2.

Importing the package registers its datasets (and its models, as they are added).
"""
from . import data, modeling  # noqa: F401  (registration by import side effect)
from .config import add_phrasedet_config

__version__ = "0.1.0"
