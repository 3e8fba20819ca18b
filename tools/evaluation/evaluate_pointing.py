#!/usr/bin/env python
"""Evaluate the pointing game (paper 004) from saved points or heatmaps (docs/EVALUATION.md).

    python tools/evaluation/evaluate_pointing.py --dataset NAME --points out/pointing_predictions.npz
    python tools/evaluation/evaluate_pointing.py --dataset NAME --heatmaps heatmaps.npz [--point-mode corner]
        [--hit-rule strict|inclusive|tolerance] [--tolerance 15] [--output results.json]

``--points``: a ``.npz`` with ``query_id`` [Q] and ``points`` [Q, 2] as (x, y) in original-image
pixels (the ``PointingGameEvaluator``'s ``pointing_predictions.npz`` is one). ``--heatmaps``: a
``.npz`` with ``query_id`` [Q], ``heatmaps`` [Q, h, w] and optionally ``point_mode``; each map's
maximum becomes a point by ``--point-mode`` (default: the file's, else ``corner``, the released
code's). The file must hold every query of ``--dataset`` once and no other. Prints the table (model
and centre baseline under every rule, the main rule marked, with their hit tests); ``--output``
writes ``{"pointing": metrics, "protocol": {...}}`` as JSON. The numbers equal the in-loop
evaluator's (same code).
"""
import argparse
import logging
import sys

import phrasedet  # noqa: F401  (registers the datasets; must come before the catalog lookups)
from phrasedet.evaluation.pointing import (DEFAULT_TOLERANCE, HIT_RULES, PointingProtocol, evaluate_heatmaps_file,
                                           evaluate_points_file, format_pointing_table, pointing_title,
                                           write_pointing_results)
from phrasedet.modeling.heatmap import POINT_MODES


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, help="registered pointing split (records with 'queries')")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--points", help=".npz with query_id [Q] and points [Q, 2] (x, y)")
    source.add_argument("--heatmaps", help=".npz with query_id [Q], heatmaps [Q, h, w] (and optionally point_mode)")
    parser.add_argument("--point-mode", choices=POINT_MODES, default=None,
                        help="heatmap maximum -> point (default: the file's point_mode, else corner)")
    parser.add_argument("--hit-rule", choices=HIT_RULES, default="strict", help="the main rule (all are reported)")
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                        help="pixels of the original image for the tolerance rule")
    parser.add_argument("--output", help="write the results and the protocol here (JSON)")
    args = parser.parse_args(argv)
    if args.point_mode and not args.heatmaps:
        parser.error("--point-mode applies to --heatmaps only")
    return args


def evaluate(args) -> dict:
    if args.points:
        return evaluate_points_file(args.points, args.dataset, args.hit_rule, args.tolerance)
    return evaluate_heatmaps_file(args.heatmaps, args.dataset, args.point_mode, args.hit_rule, args.tolerance)


def main(argv=None) -> dict:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        protocol = PointingProtocol.checked(args.hit_rule, args.tolerance)
        results = evaluate(args)
    except (ValueError, FileNotFoundError, KeyError) as e:
        sys.exit(f"error: {e}")
    metrics = results["pointing"]
    print(pointing_title(f"{args.dataset} from {args.points or args.heatmaps}", metrics, protocol))
    print(format_pointing_table(metrics, protocol))
    if args.output:
        write_pointing_results(args.output, results, protocol)
        print(f"wrote {args.output}")
    return results


if __name__ == "__main__":
    main()
