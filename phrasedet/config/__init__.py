"""``add_phrasedet_config``: every config key phrasedet adds to Detectron2's, with its default.

One function per concern, as DensePose's config does; ``add_phrasedet_config`` calls them all.
"""
from .common import add_selection_config, add_solver_config, add_weights_config
from .phrase_detection import add_phrase_detection_config
from .pointing import add_pointing_config
from .pretraining import add_pretraining_config
from .retrieval import add_retrieval_config
from .text import add_text_config

__all__ = ["add_phrasedet_config", "add_text_config", "add_solver_config", "add_weights_config", "add_selection_config",
           "add_phrase_detection_config", "add_retrieval_config", "add_pointing_config", "add_pretraining_config"]


def add_phrasedet_config(cfg):
    """Add phrasedet's keys to a Detectron2 config (call before ``merge_from_file``)."""
    add_text_config(cfg)
    add_solver_config(cfg)
    add_weights_config(cfg)
    add_selection_config(cfg)
    add_phrase_detection_config(cfg)
    add_retrieval_config(cfg)
    add_pointing_config(cfg)
    add_pretraining_config(cfg)
    return cfg
