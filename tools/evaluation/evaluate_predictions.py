#!/usr/bin/env python
"""Evaluate a phrase-predictions file (docs/EVALUATION.md) on a registered test split.

    python tools/evaluation/evaluate_predictions.py --predictions out/phrase_predictions.jsonl \\
        --dataset flickr30k_entities_test [--mode reference|standard] [--output-dir DIR]
        [--phrase-filter phrase_filter.json] [--ppa]

Prints the per-bucket table (mAP, localization accuracy, in percent). With --output-dir writes
``phrase_detection_results.json`` (the evaluator's results dict) and ``phrase_aps.json`` (per
phrase). The numbers equal those of the in-loop ``PhraseDetectionEvaluator`` on the same
detections.

``--phrase-filter`` (a filter written by ``phrasedet.engine.phrase_filtering``, e.g.
``<OUTPUT_DIR>/inference/<dataset>/phrase_filter.json``) evaluates with phrase filtering (paper
003 Sec. 6.2, docs/EVALUATION.md): both tables are printed, the results dict holds
``phrase_detection`` (filtered, with the filter's recall) and ``phrase_detection_unfiltered``, and
``phrase_aps.json`` is the filtered per-phrase APs.

``--ppa`` also evaluates on the PPA-augmented ground truth (paper 003 Tables III, V; needs nltk's
WordNet): the results dict adds ``phrase_detection_ppa`` (and ``phrase_detection_ppa_unfiltered``
with a filter) and the test occurrences per bucket without and with PPA are printed;
``phrase_detection`` and ``phrase_aps.json`` stay the plain ones.

``--presence-oracle`` also evaluates the detections of the phrases present in their image only
(phrasedet/evaluation/phrase_detection/presence_oracle.py, a diagnostic: the mAP without the
false positives on absent phrases): its table is printed too, and the results dict adds
``phrase_detection_presence_oracle``.
"""
import argparse
import json
import logging
import os
import sys

import phrasedet  # noqa: F401  (registers the datasets; must come before the catalog lookups)
from phrasedet.data.ppa import WordNetUnavailable
from phrasedet.evaluation import MODES, evaluate_predictions_file, format_results_table
from phrasedet.evaluation.phrase_detection.phrase_filter import format_filtered_report
from phrasedet.evaluation.phrase_detection.ppa_ground_truth import format_ppa_report
from phrasedet.evaluation.phrase_detection.predictions import MAX_IGNORED_FRACTION

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
    parser.add_argument("--phrase-filter", default=None, metavar="FILE",
                        help="a phrase filter (JSON): also evaluate with phrase filtering and report its recall")
    parser.add_argument("--max-ignored-fraction", type=float, default=MAX_IGNORED_FRACTION,
                        help="fail when more than this share of the records names phrases that are not test phrases "
                             "(after normalization)")
    parser.add_argument("--ppa", action="store_true",
                        help="also evaluate on the PPA-augmented ground truth (WordNet synonyms/hypernyms; paper 003 Table V)")
    parser.add_argument("--presence-oracle", action="store_true",
                        help="also evaluate with the detections of absent phrases removed (a diagnostic upper bound)")
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        results, result, vocabulary = evaluate_predictions_file(
            args.predictions, args.dataset, mode=args.mode, iou_thresh=args.iou_thresh,
            train_dataset=args.train_dataset, return_result=True, phrase_filter=args.phrase_filter,
            max_ignored_fraction=args.max_ignored_fraction, ppa=args.ppa, presence_oracle=args.presence_oracle)
    except (ValueError, FileNotFoundError, WordNetUnavailable) as e:
        sys.exit(f"error: {e}")
    header = f"Phrase detection on {args.dataset} (mode={args.mode}, IoU>={args.iou_thresh})"
    if args.ppa:
        print(format_ppa_report(header, results))
    elif args.phrase_filter:
        print(format_filtered_report(header, results))
    else:
        print(f"{header}, in %:")
        print(format_results_table(results["phrase_detection"]))
    if args.presence_oracle:
        print(f"\n{header}, detections of the phrases present in their image only (presence oracle), in %:")
        print(format_results_table(results["phrase_detection_presence_oracle"]))
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
