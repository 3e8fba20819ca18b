#!/usr/bin/env python
"""Evaluate a phrase-predictions file (docs/EVALUATION.md) on a registered test split.

    python tools/evaluate_predictions.py --predictions out/phrase_predictions.jsonl \\
        --dataset flickr30k_entities_test [--mode reference|standard] [--output-dir DIR]

Prints the per-bucket table (mAP, localization accuracy, in percent). With --output-dir writes
``phrase_detection_results.json`` (the evaluator's results dict) and ``phrase_aps.json`` (per
phrase). The numbers equal those of the in-loop ``PhraseDetectionEvaluator`` on the same
detections.
"""
import argparse
import json
import logging
import os
import sys

import phrasedet  # noqa: F401  (registers the datasets; must come before the catalog lookups)
from phrasedet.evaluation import MODES, evaluate_predictions_file, format_results_table

RESULTS_FILE = "phrase_detection_results.json"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--predictions", required=True, help="JSON list or JSON lines of detection records")
    parser.add_argument("--dataset", required=True, help="registered test split, e.g. flickr30k_entities_test")
    parser.add_argument("--mode", default="reference", choices=MODES)
    parser.add_argument("--iou-thresh", type=float, default=0.5)
    parser.add_argument("--train-dataset", default=None,
                        help="split whose counts define the buckets (default: the dataset's train_dataset metadata)")
    parser.add_argument("--output-dir", default=None, help=f"write {RESULTS_FILE} and phrase_aps.json here")
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        results, result, vocabulary = evaluate_predictions_file(
            args.predictions, args.dataset, mode=args.mode, iou_thresh=args.iou_thresh,
            train_dataset=args.train_dataset, return_result=True)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
    print(f"Phrase detection on {args.dataset} (mode={args.mode}, IoU>={args.iou_thresh}), in %:")
    print(format_results_table(results["phrase_detection"]))
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
        with open(os.path.join(args.output_dir, RESULTS_FILE), "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
        with open(os.path.join(args.output_dir, "phrase_aps.json"), "w", encoding="utf-8") as f:
            json.dump(result.per_phrase(vocabulary), f, indent=1)
        print(f"wrote {os.path.join(args.output_dir, RESULTS_FILE)}")
    return results


if __name__ == "__main__":
    main()
