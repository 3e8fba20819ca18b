"""Datasets, the built-in synthetic dataset, and the phrase dataset mapper."""
from . import datasets  # noqa: F401  (registers the builtin dataset names)
from .datasets import *  # noqa: F401,F403
