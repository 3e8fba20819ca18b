"""phrasedet's models: importing registers meta-architectures, ROI heads and region classifiers."""
from . import classifiers, meta_arch, roi_heads  # noqa: F401
from .classifiers import REGION_CLASSIFIER_REGISTRY, PhraseTargets, build_region_classifier
from .meta_arch import PhraseRCNN
from .phrase_features import PhraseFeatureBank, build_phrase_feature_bank
from .roi_heads import PhraseROIHeads
