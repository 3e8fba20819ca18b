#!/usr/bin/env python
"""Paper 004's claims on the built-in dataset, in one command:

    python tools/compare/compare_pointing.py [--output-root output/pointing_compare] [--seeds 0 1 2]
        [--representations cnn oracle] [--backbone-weights PATH | none] [--word-vectors PATH] [--budget 3000]
        [--val-period 100] [--models dsve_loc dsve_loc_gap dsve_loc_sum dsve_loc_warmup] [--resume] [KEY VALUE ...]

DSVE-loc (``configs/pointing/dsve_loc.yaml``), its two ablations (average pooling instead of
WELDON, the sum over negatives instead of the hardest) and a reference row (the hardest negatives
after VSE-infinity's one-epoch warm-up with the sum) are trained with the same budget for each
seed on each image representation, each validated on the validation captions every
``--val-period`` iterations, and their best validation snapshot is evaluated on retrieval (the test
captions) and on the pointing game (the test split's phrase boxes) with the centre baseline beside
it. Per representation, the table (mean ± standard deviation over the seeds) and one verdict per
claim (``phrasedet/engine/comparison/pointing_claims.py``) are printed and written to
``<output-root>/comparison.json``; the validation curves are drawn in
``<output-root>/<representation>/learning_curves.png``.

Representations (docs/POINTING.md): ``cnn``, the maps of the built-in pretrained CNN (the
stand-in for ImageNet weights, or ``--backbone-weights``; frozen as in the paper's first stage, so
its maps are computed once, ``MODEL.RETRIEVAL.IMAGE_INPUT maps``); ``oracle``, the spatial oracle
(each cell holds the descs of the object that covers it; an upper bound, not a model).
``--resume`` reuses every finished run. Extra ``KEY VALUE`` pairs go to every run.
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

from phrasedet.engine.comparison.protocol import (REPRESENTATIONS, budget_opts, dataset_flags, draw_curves,  # noqa: E402
                                         oracle_features, pretrained_cnn, representation_records, selection_opts,
                                         add_word_vectors_argument, run_opts, word_vectors_digest, word_vectors_line)
from phrasedet.engine.comparison.pointing_claims import claim_verdicts, format_claims, format_table, split_results  # noqa: E402
from phrasedet.engine.comparison.runs import run_tool, train_run  # noqa: E402

MODELS = ["dsve_loc", "dsve_loc_gap", "dsve_loc_sum", "dsve_loc_warmup"]
VAL = "builtin_flickr30k_captions_val"
SPLITS = ("builtin_flickr30k_captions_train", VAL, "builtin_flickr30k_captions_test", "builtin_flickr30k_pointing_val",
          "builtin_flickr30k_pointing_test")


def _config(name):
    return os.path.join(ROOT, "configs", "pointing", f"{name}.yaml")


def cnn_maps(root, weights, resume, opts):
    """The frozen CNN's maps of every split (as DSVE-loc's mappers resize them) into ``<root>/features/maps``."""
    out = os.path.join(root, "features", "maps")
    if not (resume and os.path.isfile(os.path.join(out, "extractor.pth"))):
        run_tool("extract_image_features.py", "--config-file", _config("dsve_loc"), "--output-dir", out, "--maps",
                 *dataset_flags(SPLITS), "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", weights, *opts)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-root", default=os.path.join(ROOT, "output", "pointing_compare"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    p.add_argument("--representations", nargs="+", default=list(REPRESENTATIONS), choices=REPRESENTATIONS)
    p.add_argument("--backbone-weights", default="", help="the CNN (default: the built-in pretrained CNN); 'none': random")
    p.add_argument("--budget", type=int, default=3000, help="iterations of every model")
    p.add_argument("--val-period", type=int, default=100, help="iterations between two validations")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--record-root", default="", help="keep each finished run's record here and restore from it "
                   "(phrasedet/engine/comparison/run_records.py; the project's: results/pointing_compare)")
    add_word_vectors_argument(p)
    p.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE config overrides for every run")
    args = p.parse_args(argv)
    args.opts = run_opts(args)
    text = word_vectors_digest(_config("dsve_loc"), args.opts)
    print(word_vectors_line(args, _config("dsve_loc"), args.opts, text), flush=True)
    start, summary = time.perf_counter(), {"seeds": args.seeds, "budget": args.budget, "word_vectors": text,
                                           "representations": {}}
    protocol = hit_rule(args.models[0], args.opts)
    for rep in args.representations:
        root, weights = os.path.join(args.output_root, rep), ""
        if rep == "oracle":
            maps = oracle_features(root, args.resume)["maps"]
        else:
            weights = pretrained_cnn(args.backbone_weights)
            print(f"image CNN: {weights or 'random initialization'}", flush=True)
            maps = cnn_maps(root, weights, args.resume, args.opts)
        on_maps = ["MODEL.RETRIEVAL.IMAGE_INPUT", "maps", "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR", maps]
        records = representation_records(root, args.record_root, rep, weights, os.path.join(maps, f"{SPLITS[0]}.npy"),
                                         word_vectors=text)
        runs, minutes, curves = {m: [] for m in args.models}, {m: [] for m in args.models}, {m: [] for m in args.models}
        for seed in args.seeds:
            print(f"{rep}, seed {seed}", flush=True)
            for name in args.models:
                out = os.path.join(root, f"seed{seed}", name)
                results, spent = train_run(name, _config(name), out, args.resume,
                                           [*on_maps, *budget_opts(args.budget), *selection_opts(VAL, args.val_period),
                                            "SEED", seed, *args.opts], records=records)
                runs[name].append(split_results(results))
                minutes[name].append(spent)
                curves[name].append(os.path.join(out, "metrics.json"))
        mean_minutes = {m: sum(v) / len(v) for m, v in minutes.items()}
        verdicts = claim_verdicts(runs)
        print(f"\n{rep}: built-in test split, pointing game with the {protocol} hit rule (every rule: each run's "
              f"inference/*/pointing_results.json); seeds {', '.join(map(str, args.seeds))}; budget {args.budget}, "
              f"best validation snapshot tested\n")
        print(format_table(runs, mean_minutes))
        print()
        print(format_claims(verdicts))
        print(draw_curves(curves, os.path.join(root, "learning_curves.png"),
                          f"Pointing (DSVE-loc), {rep}: validation rsum (builtin_flickr30k_captions_val)"))
        summary["representations"][rep] = {"backbone_weights": weights, "maps": maps, "runs": runs,
                                           "minutes": mean_minutes, "verdicts": verdicts}
    print(f"\n{(time.perf_counter() - start) / 60:.1f} min in all")
    os.makedirs(args.output_root, exist_ok=True)
    with open(os.path.join(args.output_root, "comparison.json"), "w") as f:
        json.dump(summary, f, indent=1)


def hit_rule(model, opts) -> str:
    """``TEST.POINTING.HIT_RULE`` (and tolerance) of the runs, for the table's title."""
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(_config(model))
    cfg.merge_from_list(list(opts))
    t = cfg.TEST.POINTING
    return f"{t.HIT_RULE} ({t.TOLERANCE:g} px)" if t.HIT_RULE == "tolerance" else t.HIT_RULE


if __name__ == "__main__":
    main()
