"""Evaluators, one per task family, each a Detectron2 ``DatasetEvaluator`` chosen by the test
dataset's ``evaluator_type``:

- ``phrase_detection/``: phrase detection mAP (zero/few/common-shot) and localization accuracy (paper 003);
- ``retrieval/``: image-sentence retrieval Recall@K, median and mean rank (papers 000-002);
- ``pointing/``: pointing-game accuracy and its centre baseline (paper 004);
- ``image_labels.py``: label AUCs of the built-in pretraining CNN on its validation images;
  ``representation_probe.py``: a linear probe of any frozen image representation of the built-in
  dataset (what the captions state, read off the features); ``region_probe.py``: the same probe on a
  phrase detector's region features of the built-in objects.

Every public name is re-exported here.
"""
from .phrase_detection import *  # noqa: F401,F403
from .phrase_detection import __all__ as _phrase_detection_all
from .retrieval import *  # noqa: F401,F403
from .retrieval import __all__ as _retrieval_all
from .pointing import *  # noqa: F401,F403
from .pointing import __all__ as _pointing_all

from .image_labels import ImageLabelsEvaluator

__all__ = list(_phrase_detection_all) + list(_retrieval_all) + list(_pointing_all) + ["ImageLabelsEvaluator"]
