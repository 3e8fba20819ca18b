"""Phrase-conditioned ROI heads; importing registers ``PhraseROIHeads``."""
from .phrase_box_regression import PhraseBoxRegressor
from .phrase_roi_heads import PhraseROIHeads
from .region_features import RegionFeatureExtractor, box_geometry
