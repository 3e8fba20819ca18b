"""phrasedet's models: importing registers meta-architectures, ROI heads, region classifiers and
sentence encoders.

Per family: ``meta_arch/phrase_rcnn.py``, ``roi_heads/`` and ``classifiers/`` (phrase detection);
``meta_arch/image_text_embedding.py`` (retrieval); ``meta_arch/dsve_loc.py`` and ``heatmap.py``
(the pointing game). Shared by the families: ``image_encoders.py``,
``pooling.py``, ``projection.py``, ``two_branch.py``, ``scorers.py``, ``sentence_encoders/``,
``losses/`` and ``cca/`` (linear and Deep CCA, their fitting and files, CCA-initialized layers;
the CCA and Deep CCA region classifiers that use them are in ``classifiers/``).
"""
from . import backbone, classifiers, meta_arch, roi_heads, sentence_encoders  # noqa: F401
from .classifiers import REGION_CLASSIFIER_REGISTRY, PhraseTargets, build_region_classifier
from .meta_arch import DSVELoc, ImageTextEmbedding, PhraseRCNN
from .phrase_features import PhraseFeatureBank, build_phrase_feature_bank
from .roi_heads import PhraseROIHeads
from .sentence_encoders import SENTENCE_ENCODER_REGISTRY, build_sentence_encoder
