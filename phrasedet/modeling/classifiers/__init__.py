"""Region classifiers scoring (phrase, region) pairs; importing registers them."""
from .build import REGION_CLASSIFIER_REGISTRY, PhraseTargets, build_region_classifier, dot_scores
from .qa_rcnn import QARCNNClassifier
from .cca import CCAClassifier
from .embedding_net import EmbeddingNetClassifier
from .cite import CITEClassifier
from .deep_cca import DeepCCAClassifier
