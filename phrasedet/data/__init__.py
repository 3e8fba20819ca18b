"""Datasets, the built-in synthetic dataset, and the mappers: phrases (phrase detection), captions (retrieval),
pointing-game queries, image labels and object detection (the built-in pretraining split)."""
from . import datasets  # noqa: F401  (registers the builtin dataset names)
from .datasets import *  # noqa: F401,F403
from .caption_mapper import CaptionDatasetMapper
from .dataset_mapper import PhraseDatasetMapper
from .pointing_mapper import PointingDatasetMapper, phrase_detector_pointing_mapper
from .label_mapper import ImageLabelsMapper
from .detection_mapper import DetectionDatasetMapper
from .image_features import attach_image_features, write_image_features
from .statistics import training_vocabulary
from .phrase_sampling import choose_phrases, sampling_weights
from .ppa import PositivePhraseAugmenter, WordNetLexicon, WordNetUnavailable
