"""The pointing game (paper 004, DSVE-loc): is the model's point for a text query inside the
query's ground-truth box? Accuracy of the model and of the centre baseline under every hit rule.

See docs/EVALUATION.md ("Pointing game") for the protocol, the hit rules' exact inequalities,
the centre baseline, the saved files and the differences from the released code.
"""
from .centre import centre_points, query_centre_points
from .dataset import PointingGroundTruth, load_pointing_split
from .evaluator import PointingGameEvaluator
from .files import (POINTING_PREDICTIONS_FILE, POINTING_RESULTS_FILE, load_heatmaps, load_pointing_predictions,
                    load_points, save_heatmaps, save_pointing_predictions, save_points, write_pointing_results)
from .heatmaps import points_of_heatmaps
from .hit_rules import (DEFAULT_TOLERANCE, HIT_RULES, all_rule_hits, box_distances, check_hit_rule, describe_rule,
                        inclusive_hits, point_hits, rule_key, rule_keys, strict_hits, tolerance_hits)
from .metrics import PointingProtocol, pointing_accuracy, pointing_metrics, score_points
from .outputs import OutputPoints, box_centres, detection_points
from .pointing_game import align_queries, evaluate_heatmaps_file, evaluate_points, evaluate_points_file
from .report import format_pointing_table, pointing_title

__all__ = [
    "DEFAULT_TOLERANCE", "HIT_RULES", "OutputPoints", "POINTING_PREDICTIONS_FILE", "POINTING_RESULTS_FILE",
    "PointingGameEvaluator", "PointingGroundTruth", "PointingProtocol", "align_queries", "all_rule_hits",
    "box_centres", "box_distances", "centre_points", "check_hit_rule", "describe_rule", "detection_points",
    "evaluate_heatmaps_file", "evaluate_points", "evaluate_points_file", "format_pointing_table", "inclusive_hits",
    "load_heatmaps", "load_pointing_predictions", "load_pointing_split", "load_points", "point_hits",
    "pointing_accuracy", "pointing_metrics", "pointing_title", "points_of_heatmaps", "query_centre_points",
    "rule_key", "rule_keys", "save_heatmaps", "save_pointing_predictions", "save_points", "score_points",
    "strict_hits", "tolerance_hits", "write_pointing_results",
]
