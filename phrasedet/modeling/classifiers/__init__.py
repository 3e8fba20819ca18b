"""Region classifiers scoring (phrase, region) pairs; importing registers them."""
from .build import REGION_CLASSIFIER_REGISTRY, PhraseTargets, build_region_classifier
from .qa_rcnn import QARCNNClassifier
