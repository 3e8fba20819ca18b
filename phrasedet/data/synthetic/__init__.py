"""The built-in synthetic dataset: shapes on coloured backgrounds, written in the on-disk formats
of Flickr30K Entities and refclef (ReferIt), read back by the same loaders as the real data.

``generate_builtin_dataset(root, seed=0, num_train=600, num_val=60, num_test=150)`` writes one;
``ensure_builtin_dataset(cache_dir=None, seed=0)`` returns the root of a cached copy, generating
it on first use. ``tools/data/make_builtin_dataset.py`` is the command-line front end.
"""
from .builtin import DEFAULT_SIZES, FEW_SHOT_MAX, GENERATOR_VERSION, ensure_builtin_dataset, generate_builtin_dataset
from .scene import FREQUENT_COMBOS, HELD_OUT_COMBOS, RARE_COMBOS

__all__ = ["GENERATOR_VERSION", "DEFAULT_SIZES", "FEW_SHOT_MAX", "HELD_OUT_COMBOS", "RARE_COMBOS",
           "FREQUENT_COMBOS", "ensure_builtin_dataset", "generate_builtin_dataset"]
