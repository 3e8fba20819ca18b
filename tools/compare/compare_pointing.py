#!/usr/bin/env python
"""Paper 004's claims on the built-in dataset, in one command:

    python tools/compare/compare_pointing.py [--output-root output/pointing_compare] [--seeds 0 1 2]
        [--representations cnn oracle] [--backbone-weights PATH | none] [--word-vectors PATH] [--budget 6000]
        [--val-period 100] [--models dsve_loc dsve_loc_gap dsve_loc_sum dsve_loc_warmup dsve_loc_warmup_plateau]
        [--resume] [KEY VALUE ...]

DSVE-loc (``configs/pointing/dsve_loc.yaml``), its two ablations (average pooling instead of
WELDON, the sum over negatives instead of the hardest) and two reference rows (the hardest negatives
after a warm-up with the sum: VSE-infinity's one epoch, and as long as the sum needs to leave its
plateau, issue 43) are trained with the same budget for each
seed on each image representation, each validated on the validation captions every
``--val-period`` iterations, and their best validation snapshot is evaluated on retrieval (the test
captions) and on the pointing game (the test split's phrase boxes) with the centre baseline beside
it. Per representation, the table (mean ± standard deviation over the seeds) and one verdict per
claim (``phrasedet/engine/comparison/pointing_claims.py``; UNDECIDED when one of its runs was still
gaining when the budget ended) are printed and written to
``<output-root>/comparison.json``; the validation curves are drawn in
``<output-root>/<representation>/learning_curves.png``.

Representations (docs/POINTING.md): ``cnn``, the maps of the built-in pretrained CNN (the
stand-in for ImageNet weights, or ``--backbone-weights``; frozen as in the paper's first stage, so
its maps are computed once, ``MODEL.RETRIEVAL.IMAGE_INPUT maps``); ``oracle``, the spatial oracle
(each cell holds the descs of the object that covers it; an upper bound, not a model).
``--resume`` reuses every finished run. Extra ``KEY VALUE`` pairs go to every run.

``--study cold_start`` runs issue 43's study instead of the claims: DSVE-loc with the hardest
negatives from a cold start, and each of ``--variants`` changing one thing of it (a warm-up with
the sum as long as the sum's own curve needs, the paper's batch of 160, the paper's learning rate,
a GRU, no pooled dropout: phrasedet/engine/comparison/cold_start.py), into
``<rep>/cold_start/seed<s>/<variant>``, with whether each left the all-equal plateau.
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

from phrasedet.engine.comparison.protocol import (REPRESENTATIONS, PLATEAU_TOLERANCE, budget_opts, dataset_flags,  # noqa: E402
                                         draw_curves, gaining_runs, oracle_features, pretrained_cnn, representation_records, selection_opts,
                                         add_word_vectors_argument, run_opts, word_vectors_digest, word_vectors_line)
from phrasedet.engine.comparison.pointing_claims import claim_verdicts, format_claims, format_table, split_results  # noqa: E402
from phrasedet.engine.comparison.runs import run_tool, train_run  # noqa: E402
from phrasedet.engine.comparison import cold_start  # noqa: E402

MODELS = ["dsve_loc", "dsve_loc_gap", "dsve_loc_sum", "dsve_loc_warmup", "dsve_loc_warmup_plateau"]
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
    p.add_argument("--budget", type=int, default=6000,
                   help="iterations of every model (6,000: chosen from the pointing curves, docs/POINTING.md; "
                        "the records of 3,000 in results/pointing_compare are the earlier budget's)")
    p.add_argument("--val-period", type=int, default=100, help="iterations between two validations")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--record-root", default="", help="keep each finished run's record here and restore from it "
                   "(phrasedet/engine/comparison/run_records.py; the project's: results/pointing_compare)")
    p.add_argument("--study", default="", choices=["", "cold_start"],
                   help="cold_start: issue 43's study of the hardest negatives' cold start instead of the claims "
                        "(phrasedet/engine/comparison/cold_start.py), runs in <rep>/cold_start/")
    p.add_argument("--variants", nargs="+", default=list(cold_start.VARIANTS), choices=cold_start.VARIANTS,
                   help="the cold-start study's variants")
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

        def seed_opts(seed):
            return [*on_maps, *budget_opts(args.budget), *selection_opts(VAL, args.val_period), "SEED", seed]

        if args.study == "cold_start":
            summary["representations"][rep] = run_cold_start(args, root, seed_opts, records)
            continue
        runs, minutes, curves = {m: [] for m in args.models}, {m: [] for m in args.models}, {m: [] for m in args.models}
        for seed in args.seeds:
            print(f"{rep}, seed {seed}", flush=True)
            for name in args.models:
                out = os.path.join(root, f"seed{seed}", name)
                results, spent = train_run(name, _config(name), out, args.resume, [*seed_opts(seed), *args.opts],
                                           records=records)
                runs[name].append(split_results(results))
                minutes[name].append(spent)
                curves[name].append(os.path.join(out, "metrics.json"))
        mean_minutes = {m: sum(v) / len(v) for m, v in minutes.items()}
        gaining = gaining_runs(curves, [f"seed {s}" for s in args.seeds], "retrieval/rsum", PLATEAU_TOLERANCE)
        verdicts = claim_verdicts(runs, gaining)
        print(f"\n{rep}: built-in test split, pointing game with the {protocol} hit rule (every rule: each run's "
              f"inference/*/pointing_results.json); seeds {', '.join(map(str, args.seeds))}; budget {args.budget}, "
              f"best validation snapshot tested\n")
        print(format_table(runs, mean_minutes))
        print()
        print(format_claims(verdicts))
        print(draw_curves(curves, os.path.join(root, "learning_curves.png"),
                          f"Pointing (DSVE-loc), {rep}: validation rsum (builtin_flickr30k_captions_val)"))
        summary["representations"][rep] = {"backbone_weights": weights, "maps": maps, "runs": runs,
                                           "minutes": mean_minutes, "verdicts": verdicts, "still_gaining": gaining}
    print(f"\n{(time.perf_counter() - start) / 60:.1f} min in all")
    os.makedirs(args.output_root, exist_ok=True)
    with open(os.path.join(args.output_root, f"comparison_{args.study}.json" if args.study else "comparison.json"), "w") as f:
        json.dump(summary, f, indent=1)


SUM_SEEDS = (0, 1, 2)  # the sum's recorded runs whose mean curve sets the warm-up


def run_cold_start(args, root, seed_opts, records) -> dict:
    """Issue 43's study on one representation: for each seed, the cold-start ``dsve_loc`` run (the
    comparison's own) and each variant (``<root>/cold_start/seed<s>/<variant>``); prints the table.
    Returns {"warmup": iterations, "level": the validation rsum that marks the plateau left,
    "rows": {model: [row per seed]}}."""
    from detectron2.data import DatasetCatalog

    from phrasedet.engine.comparison.protocol import config_of
    from phrasedet.engine.model_selection import read_selection
    from phrasedet.utils.learning_curves import half_gain, read_curve

    cfg = config_of(_config("dsve_loc"), args.opts)
    batch, margin, num_images = cfg.SOLVER.IMS_PER_BATCH, cfg.MODEL.RETRIEVAL.LOSS.MARGIN, len(DatasetCatalog.get(SPLITS[0]))
    files = []
    for seed in SUM_SEEDS:  # the sum's runs (restored from their records, else trained): the warm-up and the level
        out = os.path.join(root, f"seed{seed}", "dsve_loc_sum")
        train_run("dsve_loc_sum", _config("dsve_loc_sum"), out, args.resume, [*seed_opts(seed), *args.opts], records=records)
        files.append(os.path.join(out, "metrics.json"))
    iteration, level = half_gain([read_curve(f) for f in files])
    warmup = iteration + 1  # validated after iteration i - 1
    print(f"warm-up: {warmup} iterations; plateau left at validation rsum {level:.1f} (where the mean validation curve "
          f"of dsve_loc_sum, seeds {', '.join(map(str, SUM_SEEDS))}, made half of its gain)", flush=True)

    rows = {}
    for seed in args.seeds:
        for name in ["dsve_loc", *args.variants]:
            if name == "dsve_loc":
                config, extra, out, change = "dsve_loc", [], os.path.join(root, f"seed{seed}", "dsve_loc"), "none (cold start)"
            else:
                config = "dsve_loc_warmup" if name == "warmup_half_gain" else "dsve_loc"
                extra = cold_start.variant_opts(name, num_images, batch, warmup)
                out, change = os.path.join(root, "cold_start", f"seed{seed}", name), " ".join(map(str, extra))
            results, _ = train_run(name, _config(config), out, args.resume, [*seed_opts(seed), *extra, *args.opts],
                                   records=records)
            run = split_results(results)
            best = read_selection(out)
            rows.setdefault(name, []).append({
                "seed": seed, "change": change, "best": best["value"], "best_iteration": best["iteration"],
                "i2t_R@1": run["retrieval"]["i2t_R@1"], "t2i_R@1": run["retrieval"]["t2i_R@1"],
                "pointing": run["pointing"]["accuracy"],
                "ratio": cold_start.all_equal_ratio(os.path.join(out, "metrics.json"), margin,
                                                    cold_start.PAPER_BATCH if name == "batch160" else batch)})
    print(f"\nCold start of the hardest negatives ({os.path.basename(root)}; budget {args.budget}):\n")
    print(cold_start.format_study(rows, level))
    return {"warmup": warmup, "level": level, "rows": rows}


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
