#!/usr/bin/env python
"""Paper 004's claims on the built-in dataset, in one command:

    python tools/compare_pointing.py [--output-root output/pointing_compare] [--seeds 0 1 2]
        [--backbone-weights PATH | none] [--models dsve_loc dsve_loc_gap dsve_loc_sum dsve_loc_warmup] [--resume]
        [KEY VALUE ...]

DSVE-loc (``configs/pointing/dsve_loc.yaml``), its two ablations (average pooling instead of
WELDON, the sum over negatives instead of the hardest) and a reference row (the hardest negatives
after VSE-infinity's one-epoch warm-up with the sum) are trained with the same budget for each
seed, then evaluated on retrieval (the test captions) and on the pointing game (the test split's
phrase boxes) with the centre baseline beside it. The table (mean ± standard deviation over the
seeds) and one verdict per claim (``phrasedet/engine/pointing_claims.py``) are printed and written
to ``<output-root>/comparison.json``.

The CNN, the built-in stand-in for ImageNet weights, is the ResNet-18 of the phrase-aware
detector of ``make demo`` (``--backbone-weights``; see ``tools/compare_retrieval.py``), frozen as
in the paper's first stage. ``--resume`` reuses every finished run. Extra ``KEY VALUE`` pairs go
to every run.
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from phrasedet.engine.pointing_claims import claim_verdicts, format_claims, format_table, split_results  # noqa: E402
from phrasedet.engine.runs import detector_checkpoint, train_run  # noqa: E402

MODELS = ["dsve_loc", "dsve_loc_gap", "dsve_loc_sum", "dsve_loc_warmup"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-root", default=os.path.join(ROOT, "output", "pointing_compare"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    p.add_argument("--backbone-weights", default="", help="a detector checkpoint, or 'none' for a random CNN")
    p.add_argument("--resume", action="store_true")
    p.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE config overrides for every run")
    args = p.parse_args(argv)
    start = time.perf_counter()
    weights = detector_checkpoint(args.backbone_weights, args.output_root, args.resume)
    print(f"image CNN: {weights or 'random initialization'}", flush=True)
    runs, minutes = {m: [] for m in args.models}, {m: [] for m in args.models}
    for seed in args.seeds:
        print(f"seed {seed}", flush=True)
        for name in args.models:
            results, spent = train_run(name, os.path.join(ROOT, "configs", "pointing", f"{name}.yaml"),
                                       os.path.join(args.output_root, f"seed{seed}", name), args.resume,
                                       ["MODEL.RETRIEVAL.BACKBONE_WEIGHTS", weights, "SEED", seed, *args.opts])
            runs[name].append(split_results(results))
            minutes[name].append(spent)
    mean_minutes = {m: sum(v) / len(v) for m, v in minutes.items()}
    verdicts = claim_verdicts(runs)
    protocol = hit_rule(args.models[0], args.opts)
    print(f"\nBuilt-in test split, pointing game with the {protocol} hit rule (every rule: each run's inference/*/pointing_results.json); seeds {', '.join(map(str, args.seeds))}; "
          f"{(time.perf_counter() - start) / 60:.1f} min in all\n")
    print(format_table(runs, mean_minutes))
    print()
    print(format_claims(verdicts))
    with open(os.path.join(args.output_root, "comparison.json"), "w") as f:
        json.dump({"seeds": args.seeds, "backbone_weights": weights, "runs": runs, "minutes": mean_minutes,
                   "verdicts": verdicts}, f, indent=1)


def hit_rule(model, opts) -> str:
    """``TEST.POINTING.HIT_RULE`` (and tolerance) of the runs, for the table's title."""
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(ROOT, "configs", "pointing", f"{model}.yaml"))
    cfg.merge_from_list(list(opts))
    t = cfg.TEST.POINTING
    return f"{t.HIT_RULE} ({t.TOLERANCE:g} px)" if t.HIT_RULE == "tolerance" else t.HIT_RULE


if __name__ == "__main__":
    main()
