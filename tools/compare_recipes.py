#!/usr/bin/env python
"""The README's results table in one command: paper 003's recipe for each classifier, with the
same stage-1 detector and the same stage-3 budget (configs/Base-Recipe.yaml), then CITE with the
CCA cascade, printed as one table.

    python tools/compare_recipes.py [--resume] [--output-root output] [--cascade-k 10]
        [--configs cite_cca cite ...] [--extra-seeds 1 2] [KEY VALUE ...]

The first config (cite_cca) runs every stage; the others reuse its stage-1 detector
(``PHRASEDET.RECIPE.DETECTOR_WEIGHTS``), so random- and CCA-initialized classifiers sit on the very
same detector. Each run writes ``<output-root>/<config>/results.json``; ``--resume`` passes
``--resume`` on, so finished stages are not run again. Extra ``KEY VALUE`` pairs go to every run.

With a trained image-sentence retrieval model (``--filter-weights``; by default
``tools/compare_retrieval.py``'s seed-0 paper-000 embedding network, ``two_branch``, when it exists),
the first config is evaluated again with phrase filtering (paper 003 Sec. 6.2, Table VI) for each
``--filter-top-n``: rows with and without filtering, the filter's recall (test instances whose
phrase survives in their image) and the time the filter adds per test image.

Evaluation-only passes (cascade, filtering) work in ``<output-root>/<config>/eval_<name>/``, so the
recipe's own ``results.json`` is never overwritten.

``--ppa`` evaluates every run also with PPA-augmented positives (``TEST.PHRASE_DETECTION.PPA``,
paper 003 Table V; needs nltk's WordNet) and prints a second table of those metrics, with the test
instances per bucket without and with PPA (the paper's footer).

``--extra-seeds 1 2`` trains every config's stage 3 again with ``SEED 1`` and ``SEED 2`` on the same
detector (``<output-root>/seed1/<config>`` ...) and prints the spread over the seeds and, for every
``X_cca`` / ``X`` pair, CCA init minus random init seed by seed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

from phrasedet.engine.init_comparison import compare_initializations

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CONFIGS = ["cite_cca", "cite", "embedding_net_cca", "embedding_net", "cca", "deep_cca", "qa_rcnn_staged", "qa_rcnn_npa"]
COLUMNS = [("mAP_zero_shot", "zero-shot mAP"), ("mAP_few_shot", "few-shot mAP"), ("mAP_common", "common mAP"),
           ("mAP", "mAP (mean of buckets)"), ("loc_acc", "localization acc.")]
_TIME = re.compile(r"Total inference pure compute time: \S+ \(([0-9.]+) s / iter per device")
_FILTER_TIME = re.compile(r"sentences embedded in ([0-9.]+) s, ([0-9.]+) ms per test image")
# compare_retrieval.py's paper-000 embedding network, seed 0, on the features of the built-in pretrained CNN (its
# best validation snapshot; the CNN from the cache, where compare_retrieval.py trained it)
DEFAULT_FILTER = {"config": os.path.join(ROOT, "configs", "retrieval", "two_branch.yaml"),
                  "run": os.path.join(ROOT, "output", "retrieval_compare", "cnn", "seed0", "two_branch")}


def _train_net(config, out, args, extra):
    cmd = [sys.executable, os.path.join(ROOT, "tools", "train_net.py"), "--config-file", os.path.join(ROOT, "configs", f"{config}.yaml"),
           *args, "OUTPUT_DIR", out, *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT})
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout + proc.stderr, time.perf_counter() - start


def run_config(config, root, resume, extra):
    """Run one recipe; returns (results["phrase_detection"], wall seconds)."""
    out = os.path.join(root, config)
    log, seconds = _train_net(config, out, ["--resume"] if resume else [], extra)
    with open(os.path.join(out, "results.json")) as f:
        return json.load(f)["results"]["phrase_detection"], seconds


def _eval_only(config, root, name, extra):
    """``--eval-only`` of a finished recipe's final model in ``<root>/<config>/eval_<name>`` (the
    model is shaped by the recipe's CCA, found next to its weights): (log, its results)."""
    out = os.path.join(root, config)
    with open(os.path.join(out, "results.json")) as f:
        weights = json.load(f)["final_model"]
    folder = os.path.join(out, f"eval_{name}")
    log, _ = _train_net(config, folder, ["--eval-only"], ["MODEL.WEIGHTS", weights, *extra])
    with open(os.path.join(folder, "results.json")) as f:
        return log, json.load(f)["results"]


def run_cascade(config, root, k, extra):
    """``--eval-only`` of a finished recipe with and without the cascade: [(label, metrics, s/image)]."""
    rows = []
    for label, topk in ((f"{config}, full scoring", 0), (f"{config}, cascade k={k}", k)):
        log, results = _eval_only(config, root, f"cascade{topk}", ["MODEL.PHRASE_ROI_HEADS.CASCADE_TOPK", str(topk), *extra])
        rows.append((label, results["phrase_detection"], float(_TIME.findall(log)[-1])))
    return rows


def run_filtering(config, root, top_ns, retrieval, extra):
    """``--eval-only`` of a finished recipe with phrase filtering for each of ``top_ns``:
    [(label, metrics, "recall, time")], the unfiltered row first."""
    rows = []
    for n in top_ns:
        keys = ["TEST.PHRASE_FILTER.RETRIEVAL_CONFIG", retrieval["config"], "TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS",
                retrieval["weights"], "TEST.PHRASE_FILTER.RETRIEVAL_OPTS", repr(list(retrieval["opts"])),
                "TEST.PHRASE_FILTER.TOP_N", str(n)]
        log, results = _eval_only(config, root, f"filter_top{n}", keys + list(extra))
        if not rows:
            rows.append((f"{config}, no filtering", results["phrase_detection_unfiltered"], "-"))
        sentences, ms = map(float, _FILTER_TIME.findall(log)[-1])
        detector = 1000 * float(_TIME.findall(log)[-1])
        m = results["phrase_detection"]
        rows.append((f"{config}, filtered by the top {n} sentences", m,
                     f"recall {m['filter_recall']:.1f} %; +{ms:.0f} ms per image (detector {detector:.0f} ms) "
                     f"+ {sentences:.1f} s once"))
    return rows


def read_results(root, config, key):
    """``results[key]`` of ``<root>/<config>/results.json`` (None when absent)."""
    with open(os.path.join(root, config, "results.json")) as f:
        return json.load(f)["results"].get(key)


def format_ppa_footer(plain, ppa):
    """The paper's footer: test instances per bucket, without and with PPA (one run's metrics)."""
    buckets = ("zero_shot", "few_shot", "common")
    lines = ["| test instances | zero-shot | few-shot | common | total |", "|---|---|---|---|---|"]
    for label, m in (("plain", plain), ("PPA-augmented", ppa)):
        counts = [int(m[f"num_instances_{b}"]) for b in buckets]
        lines.append(f"| {label} | " + " | ".join(f"{c:,}" for c in counts) + f" | {sum(counts):,} |")
    return "\n".join(lines)


def _cell(value, percent=False):
    return "n/a" if value != value else (f"{value:.1f} %" if percent else f"{value:.2f}")


def format_table(rows, extra_header="wall time of this run"):
    head = "| model | " + " | ".join(title for _, title in COLUMNS) + f" | {extra_header} |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for label, metrics, extra in rows:
        cells = [_cell(metrics[key], key == "loc_acc") for key, _ in COLUMNS]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {extra} |")
    return "\n".join(lines)


def config_seed(config, opts):
    """``SEED`` of ``configs/<config>.yaml`` with the ``KEY VALUE`` overrides ``opts``."""
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(ROOT, "configs", f"{config}.yaml"))
    cfg.merge_from_list(list(opts))
    return cfg.SEED


def run_all(configs, root, resume, opts, detector=None):
    """Run ``configs`` under ``root``; the first trains the stage-1 detector unless ``detector`` is
    given, the others reuse it. Returns ([(config, metrics, seconds)], detector path)."""
    rows = []
    for config in configs:
        # the table has its own random-init rows: no second, built-in comparison run inside a config
        extra = ["PHRASEDET.RECIPE.COMPARE_RANDOM_INIT", "False"] + (["PHRASEDET.RECIPE.DETECTOR_WEIGHTS", detector] if detector else [])
        metrics, seconds = run_config(config, root, resume, extra + list(opts))
        rows.append((config, metrics, seconds))
        detector = detector or os.path.join(root, config, "stage1_detector", "model_final.pth")
    return rows, detector


def _mean_sd(values):
    return float(np.mean(values)), (float(np.std(values, ddof=1)) if len(values) > 1 else float("nan"))


def format_seed_table(per_seed, seeds):
    """``per_seed`` {config: [metrics of each seed]}: overall mAP seed by seed, then the mean (and
    sample standard deviation) of every column over the seeds."""
    head = "| model | " + " | ".join(f"mAP, seed {s}" for s in seeds) + " | " + " | ".join(f"mean {t}" for _, t in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (1 + len(seeds) + len(COLUMNS))]
    for config, runs in per_seed.items():
        cells = [_cell(m["mAP"]) for m in runs]
        for key, _ in COLUMNS:
            mean, sd = _mean_sd([m[key] for m in runs])
            cells.append(f"{_cell(mean, key == 'loc_acc')} ± {_cell(sd)}")
        lines.append(f"| {config} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_init_differences(per_seed, seeds):
    """For every ``X_cca`` / ``X`` pair of configs: CCA init minus random init, seed by seed
    (same detector and seed), as the mean over the seeds per column and the count of seeds where
    CCA init won."""
    head = "| CCA init minus random init | " + " | ".join(t for _, t in COLUMNS) + " | overall, seed by seed |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for config, runs in per_seed.items():
        base = config[:-len("_cca")]
        if not config.endswith("_cca") or base not in per_seed:
            continue
        diffs = [compare_initializations(c, r)["cca_minus_random"] for c, r in zip(runs, per_seed[base])]
        cells = [f"{np.mean([d[k] for d in diffs]):+.2f} ({sum(d[k] > 0 for d in diffs)}/{len(diffs)} won)" for k, _ in COLUMNS]
        by_seed = ", ".join(f"{d['mAP']:+.2f}" for d in diffs)
        lines.append(f"| {config} - {base} | " + " | ".join(cells) + f" | {by_seed} (seeds {', '.join(map(str, seeds))}) |")
    return "\n".join(lines)


def filter_model(args):
    """The retrieval model of the filtering rows: {"config", "weights", "opts"}, or None."""
    if args.filter_weights == "none":
        return None
    weights = args.filter_weights or os.path.join(DEFAULT_FILTER["run"], "model_best.pth")
    if not os.path.isfile(weights):
        print(f"\nNo phrase-filtering rows: no retrieval model at {weights} (run tools/compare_retrieval.py, or give --filter-weights)")
        return None
    default_opts = []
    if not args.filter_weights:
        from phrasedet.engine.pretrained_cnn import builtin_cnn_dir

        default_opts = ["MODEL.RETRIEVAL.IMAGE_INPUT", "features", "MODEL.RETRIEVAL.BACKBONE_WEIGHTS",
                        os.path.join(builtin_cnn_dir(), "model_final.pth")]
    return {"config": args.filter_config, "weights": weights,
            "opts": default_opts if args.filter_opts is None else args.filter_opts}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-root", default=os.path.join(ROOT, "output"))
    p.add_argument("--configs", nargs="+", default=CONFIGS, help="the first one trains the shared stage-1 detector")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--cascade-k", type=int, default=10, help="0: no cascade rows")
    p.add_argument("--extra-seeds", type=int, nargs="*", default=[],
                   help="train every config's classifier again with SEED s (same detector) in <output-root>/seed<s>/, "
                        "then print the spread over the seeds and the CCA-minus-random differences seed by seed")
    p.add_argument("--filter-weights", default="", help="a trained retrieval model for the phrase-filtering rows "
                   "(default: compare_retrieval.py's seed-0 two_branch when it exists); 'none' = no filtering rows")
    p.add_argument("--filter-config", default=DEFAULT_FILTER["config"], help="that model's retrieval config")
    p.add_argument("--filter-opts", nargs="*", default=None,
                   help="KEY VALUE overrides of that config (default, for the default model: on pixels of the built-in CNN)")
    p.add_argument("--filter-top-n", type=int, nargs="+", default=[75, 100], help="sentences retrieved per test image")
    p.add_argument("--ppa", action="store_true", help="also evaluate with PPA-augmented positives and print that table")
    p.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE config overrides for every run")
    args = p.parse_args(argv)
    if args.ppa:
        args.opts = ["TEST.PHRASE_DETECTION.PPA", "True", *args.opts]
    rows, detector = run_all(args.configs, args.output_root, args.resume, args.opts)
    print(format_table([(config, m, f"{seconds / 60:.1f} min") for config, m, seconds in rows]))
    if args.ppa:
        ppa = [(config, read_results(args.output_root, config, "phrase_detection_ppa")) for config, _, _ in rows]
        print("\nWith PPA-augmented positives (paper 003 Table V):")
        print(format_table([(config, m, "-") for config, m in ppa], "-"))
        print(format_ppa_footer(rows[0][1], ppa[0][1]))
    if args.cascade_k:
        cascade = run_cascade(args.configs[0], args.output_root, args.cascade_k, args.opts)
        print()
        print(format_table([(label, m, f"{t:.3f} s") for label, m, t in cascade], "inference per image"))
    retrieval = filter_model(args)
    if retrieval:
        print()
        print(format_table(run_filtering(args.configs[0], args.output_root, args.filter_top_n, retrieval, args.opts),
                           "filter recall; time it adds"))
    if args.extra_seeds:
        per_seed = {config: [m] for config, m, _ in rows}
        for seed in args.extra_seeds:
            seed_rows, _ = run_all(args.configs, os.path.join(args.output_root, f"seed{seed}"), args.resume,
                                   ["SEED", str(seed), *args.opts], detector=detector)
            for config, m, _ in seed_rows:
                per_seed[config].append(m)
        seeds = [config_seed(args.configs[0], args.opts)] + args.extra_seeds
        print()
        print(format_seed_table(per_seed, seeds))
        print()
        print(format_init_differences(per_seed, seeds))


if __name__ == "__main__":
    main()
