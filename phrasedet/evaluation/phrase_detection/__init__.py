"""Phrase detection mAP (zero/few/common-shot) and phrase localization accuracy (paper 003).

See docs/EVALUATION.md for the metric definitions, the two matching modes, the tie rule and the
predictions file format.
"""
from .box_iou import paired_iou, pairwise_iou
from .detections import PhraseColumns, PhraseDetections
from .evaluator import PhraseDetectionEvaluator
from .ground_truth import PhraseGroundTruth, test_vocabulary
from .phrase_detection_ap import MODES, PhraseDetectionResult, evaluate_phrase_detection
from .phrase_filter import PhraseFilter
from .presence_oracle import presence_oracle_detections
from .predictions import (PredictionWriter, evaluate_predictions_file, iter_prediction_records,
                          load_predictions)
from .report import format_results_table

__all__ = [
    "MODES", "PhraseColumns", "PhraseDetectionEvaluator", "PhraseDetectionResult", "PhraseDetections",
    "PhraseFilter", "PhraseGroundTruth", "PredictionWriter", "evaluate_phrase_detection", "evaluate_predictions_file",
    "format_results_table", "iter_prediction_records", "load_predictions", "paired_iou", "pairwise_iou",
    "presence_oracle_detections",
    "test_vocabulary",
]
