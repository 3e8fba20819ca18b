"""Datasets, the built-in synthetic dataset, and the phrase dataset mapper."""
from . import datasets  # noqa: F401  (registers the builtin dataset names)
from .datasets import *  # noqa: F401,F403
from .dataset_mapper import PhraseDatasetMapper
from .statistics import training_vocabulary
from .phrase_sampling import choose_phrases, sampling_weights
from .ppa import PositivePhraseAugmenter, WordNetLexicon, WordNetUnavailable
