#!/usr/bin/env python
"""Paper 003's claims (Tables IV-VI) on the built-in dataset, in one command, on the protocol the
retrieval and pointing comparisons share (records, --resume, verdicts over seeds, curves):

    python tools/compare/compare_recipes.py [--output-root output/phrase_detection_compare] [--detectors 0 1]
        [--seeds 0 1 2] [--models cca cite_cca cite ...] [--record-root results/phrase_detection_compare]
        [--word-vectors PATH] [--filter-weights PATH | none] [--world v3|long_tail] [--resume] [-- KEY VALUE ...]

For each stage-1 detector (``--detectors``: the recipe's stage 1 trained with ``SEED d``, as
``make demo`` trains it with ``SEED 0``), every classifier of Table IV is trained in stage 3 on that
frozen detector for each stage-3 seed (``--seeds``) with the recipe's schedule
(configs/Base-Recipe.yaml: 12,000 Adam iterations and 150 SGD, validation every epoch, the best
validation model tested), then the table (mean ± standard deviation over the seeds), one verdict
per claim (phrasedet/engine/comparison/phrase_detection_claims.py) and the validation curves
(``<output-root>/detector<d>/curves*.png``) are printed per detector and written to
``<output-root>/comparison.json``.

Runs, each one ``tools/train_net.py`` of a recipe config into ``<output-root>/detector<d>/...``
(``--study NAME``: ``<output-root>/detector<d>/NAME/...``, the same detectors):

* ``cca`` (``configs/cca.yaml``, ``SEED d``): stage 1 (the detector, unless kept), the CCA, and
  the frozen CCA tested; stage 3 trains nothing, so one run stands for every seed;
* ``detector``: the stage-1 detector's own QA R-CNN classifier tested (no stage-3 iteration);
* per seed ``s`` (``seed<s>/<model>``): ``deep_cca``, ``qa_rcnn_staged``, ``qa_rcnn_npa``,
  ``embedding_net``, ``embedding_net_cca``, ``cite``, ``cite_cca``, and ``cite_cca_init``
  (CCA-initialized CITE tested at iteration 0: what CCA initialization starts from).

Every run is also evaluated with PPA-augmented positives (Table V) and, from its test predictions
file, with the phrase-presence oracle (a diagnostic: the mAP without the detections of phrases
absent from their image, docs/EVALUATION.md; ``presence_oracle.json`` in the run and its record); ``cite_cca``'s models are
evaluated again with phrase filtering (Table VI, ``seed<s>/cite_cca_filtered``) by the retrieval
model of ``--filter-weights`` (default: paper 000's embedding network trained by
``tools/compare/compare_retrieval.py --models two_branch --seeds 0`` on the built-in CNN into
``<output-root>/filter``; ``none``: no filtering rows).

With ``--record-root`` (the project's: ``results/phrase_detection_compare``) each finished run's
record is kept there and restored by ``--resume`` (phrasedet/engine/comparison/run_records.py), keyed by the
stage-1 detector, which is kept there too (``detector<d>/detector.pth``: the runs of another
machine start from the same detector). Extra ``KEY VALUE`` pairs go to every run.

``--world long_tail`` runs every model in the long-tailed built-in world (the same scenes, images
and boxes; phrases in the long-tailed language; GloVe 6B 50-d vectors; branches 50 wide:
phrasedet/engine/comparison/worlds.py), into ``output/phrase_detection_compare_long_tail`` by default;
its detectors are trained there (stage 1 learns phrases, so they differ from version 3's); its
filter model is trained on the long-tailed captions. Its records belong in a record root of their own
(the project's: ``results/phrase_detection_compare_long_tail``).
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

from phrasedet.cache import exclusive  # noqa: E402
from phrasedet.engine.comparison.protocol import (add_word_vectors_argument, draw_curves, gaining_runs, run_opts,  # noqa: E402
                                                  word_vectors_digest, word_vectors_line, word_vectors_opts)
from phrasedet.engine.comparison.worlds import add_world_argument, get_world  # noqa: E402
from phrasedet.engine.comparison.phrase_detection_claims import (BUCKETS, claim_verdicts, format_claims, format_table,  # noqa: E402
                                                             format_under_oracle)
from phrasedet.engine.comparison.runs import finished, run_tool, train_run  # noqa: E402
from phrasedet.engine.comparison.unseen_words import format_zero_shot_split, known_words, zero_shot_split  # noqa: E402

#: model -> (config, extra KEY VALUE pairs, trained per stage-3 seed)
UNTRAINED = ["PHRASEDET.RECIPE.CLASSIFIER_ITERS", 0, "PHRASEDET.RECIPE.SECOND_PHASE.ITERS", 0,
             "PHRASEDET.RECIPE.SELECTION.DATASET", ""]
MODELS = {
    "detector": ("qa_rcnn_staged", UNTRAINED, False),
    "cca": ("cca", [], False),
    "deep_cca": ("deep_cca", [], True),
    "qa_rcnn_staged": ("qa_rcnn_staged", [], True),
    "qa_rcnn_npa": ("qa_rcnn_npa", [], True),
    "embedding_net": ("embedding_net", [], True),
    "embedding_net_cca": ("embedding_net_cca", [], True),
    "cite": ("cite", [], True),
    "cite_cca": ("cite_cca", [], True),
    "cite_cca_init": ("cite_cca", UNTRAINED, True),
}
EVERY_RUN = ["PHRASEDET.RECIPE.COMPARE_RANDOM_INIT", False, "TEST.PHRASE_DETECTION.PPA", True]
STAGE3 = ("stage3_classifier", "stage3b_classifier")
KEPT_CNN = os.path.join(ROOT, "results", "builtin_cnn", "backbone.pth")  # the CNN the retrieval records were made on
PRESENCE_FILE = "presence_oracle.json"
LOC_TOLERANCE = 1.0  # a validation curve has flattened where it never again gains more than this (points of loc. acc.)


def _config(name):
    return os.path.join(ROOT, "configs", f"{name}.yaml")


def _metrics(results):
    return results["phrase_detection"]


def _test_predictions(run):
    """(predictions file, test split) of a finished run's test evaluation (its last stage-3 phase
    that wrote one), or None."""
    import glob

    for stage in reversed(STAGE3):
        found = sorted(glob.glob(os.path.join(run, stage, "inference", "*", "phrase_predictions.jsonl")))
        if found:
            return found[-1], os.path.basename(os.path.dirname(found[-1]))
    return None


def presence_oracle(run, records=None):
    """The test metrics of a finished run with the phrase-presence oracle, or None when neither the
    run, its record nor its predictions file gives them. Computed once from the
    predictions file, checked against the run's own test mAP, and written to ``presence_oracle.json``
    in the run and in its record (``record.json`` is left as it is: the run was made by that code)."""
    from phrasedet.evaluation import evaluate_predictions_file

    path = os.path.join(run, PRESENCE_FILE)
    recorded = os.path.join(records.path(run), PRESENCE_FILE) if records is not None else ""
    if not os.path.isfile(path) and os.path.isfile(recorded):  # a run restored before its record had one
        path = recorded
    if not os.path.isfile(path):
        found = _test_predictions(run)
        if found is None:
            return None
        results = evaluate_predictions_file(found[0], found[1], presence_oracle=True)
        with open(os.path.join(run, "results.json")) as f:
            tested = _metrics(json.load(f)["results"])["mAP"]
        if abs(results["phrase_detection"]["mAP"] - tested) > 1e-9:
            raise SystemExit(f"{found[0]}: mAP {results['phrase_detection']['mAP']} from the file, {tested} in "
                             f"{os.path.join(run, 'results.json')}: not the tested model's predictions")
        for folder in [run] + ([records.path(run)] if records is not None and records.read(run) is not None else []):
            with open(os.path.join(folder, PRESENCE_FILE), "w") as f:
                json.dump({"predictions": os.path.relpath(found[0], run), **results}, f, indent=1)
    with open(path) as f:
        return json.load(f)["phrase_detection_presence_oracle"]


def test_phrase_aps(run, test_split):
    """The per-phrase APs (``phrase_aps.json``) of a finished run's test evaluation (its last
    stage-3 phase that wrote one on ``test_split``), or None."""
    for stage in reversed(STAGE3):
        path = os.path.join(run, stage, "inference", test_split, "phrase_aps.json")
        if os.path.isfile(path):
            with open(path) as f:
                return json.load(f)
    return None


def _final_model(run):
    """The tested model of a finished recipe run (its ``results.json``'s ``final_model``)."""
    with open(os.path.join(run, "results.json")) as f:
        return json.load(f)["final_model"]


class DetectorComparison:
    """The runs on one stage-1 detector: ``<root>/cca``, ``<root>/detector``, ``<root>/seed<s>/<model>``."""

    def __init__(self, d, args):
        self.d, self.args = d, args
        self.root = os.path.join(args.output_root, f"detector{d}")
        self.kept = os.path.join(args.record_root, f"detector{d}", "detector.pth") if args.record_root else ""
        self.records = None
        self.trained_here = False  # the cca run trained the detector in this process
        self.models, self.seeds = list(getattr(args, "models", [])), list(getattr(args, "seeds", []))  # --records-only: those recorded

    @property
    def base(self):
        """The folder of this comparison's runs, curves and tables: ``<root>``, or ``<root>/<study>``."""
        return os.path.join(self.root, self.args.study) if getattr(self.args, "study", "") else self.root

    def out(self, model, seed=None):
        return os.path.join(self.base, model) if seed is None else os.path.join(self.base, f"seed{seed}", model)

    def detector(self):
        """The stage-1 detector's weights: the kept one, else trained by the ``cca`` run (kept then)."""
        from phrasedet.engine.comparison.run_records import save_model

        if self.kept and os.path.isfile(self.kept):
            return self.kept
        if self.args.records_only:
            raise SystemExit(f"--records-only: detector {self.d} has no kept detector ({self.kept or 'no --record-root'})")
        trained = os.path.join(self.root, "cca", "stage1_detector", "model_final.pth")
        if not os.path.isfile(trained):
            print(f"detector {self.d}: training stage 1 (SEED {self.d}) in the cca run", flush=True)
            self._train("cca", None, [], records=None, resume=False, out=os.path.join(self.root, "cca"))
            self.trained_here = True
        if self.kept:
            save_model(trained, self.kept)
            return self.kept
        return trained

    def _train(self, model, seed, weights_opts, records, resume=None, flags=(), out=None):
        config, extra, _ = MODELS[model]
        seed_opts = ["SEED", self.d if seed is None else seed]
        return train_run(model, _config(config), out or self.out(model, seed), self.args.resume if resume is None else resume,
                         [*self.args.world_opts, *EVERY_RUN, *weights_opts, *extra, *seed_opts, *self.args.opts], flags, records)

    def run(self, text_digest):
        """Every model's runs: ({model: [metrics per seed]}, {model: mean minutes})."""
        from phrasedet.engine.comparison.run_records import RunRecords, model_digest

        weights = self.detector()
        if self.args.record_root:
            self.records = RunRecords(self.root, os.path.join(self.args.record_root, f"detector{self.d}"),
                                      model_digest(weights), ROOT, word_vectors=text_digest)
            first = os.path.join(self.root, "cca")  # the run that trained the detector
            if os.path.isfile(os.path.join(first, "results.json")) and self.records.read(first) is None:
                self.records.save(first, name="cca")
        if self.args.records_only:
            self.keep_recorded()
        on_detector = ["PHRASEDET.RECIPE.DETECTOR_WEIGHTS", weights]
        if "cite_cca" in self.models and self.args.filter is not None and not self.args.records_only:
            self.weights_for_filtering(on_detector)
        runs, ppa, minutes, self.presence, self.aps = {}, {}, {}, {}, {}
        for model in self.models:
            per_seed = MODELS[model][2]
            for seed in (self.seeds if per_seed else [None]):
                keep = model == "cca" and self.trained_here and self.out("cca") == os.path.join(self.root, "cca")  # finished
                results, spent = self._train(model, seed, on_detector, self.records, resume=True if keep else None)
                runs.setdefault(model, []).append(_metrics(results))
                ppa.setdefault(model, []).append(results["phrase_detection_ppa"])
                minutes.setdefault(model, []).append(spent)
                self.presence.setdefault(model, []).append(presence_oracle(self.out(model, seed), self.records))
                self.aps.setdefault(model, []).append(test_phrase_aps(self.out(model, seed), self.args.test_split))
        if "cite_cca" in ppa:
            runs["cite_cca_ppa"] = ppa["cite_cca"]
        if "cite_cca" in self.models and self.args.filter is not None and self.filtered_recorded():
            runs["cite_cca_filtered"] = [self.filtered(seed, run["mAP"]) for seed, run in zip(self.seeds, runs["cite_cca"])]
        return runs, ppa, {m: sum(v) / len(v) for m, v in minutes.items()}

    def keep_recorded(self):
        """``--records-only``: keep the models with a record and the seeds in which every kept
        per-seed model has one (so every claim compares the same seeds); say what is left out."""
        def recorded(model, seed):
            return finished(self.out(model, seed), True, self.records)

        gone = [m for m in self.models if not any(recorded(m, s) for s in (self.seeds if MODELS[m][2] else [None]))]
        self.models = [m for m in self.models if m not in gone]
        partial = [(m, s) for m in self.models if MODELS[m][2] for s in self.seeds if not recorded(m, s)]
        self.seeds = [s for s in self.seeds if all(not MODELS[m][2] or recorded(m, s) for m in self.models)]
        print(f"detector {self.d}, --records-only: models {', '.join(self.models) or 'none'}; seeds {self.seeds}"
              + (f"; no record (left out): {', '.join(gone)}" if gone else "")
              + (f"; seeds left out for {', '.join(f'{m} seed {s}' for m, s in partial)}" if partial else ""), flush=True)
        if not self.seeds and any(MODELS[m][2] for m in self.models):
            raise SystemExit(f"--records-only: detector {self.d} has no seed with a record of every model")

    def filtered_recorded(self):
        """Whether the filtering rows can be given: always, but with ``--records-only`` only when
        every kept seed's filtered evaluation is recorded."""
        return not self.args.records_only or all(finished(self.out("cite_cca_filtered", s), True, self.records) for s in self.seeds)

    def weights_for_filtering(self, on_detector):
        """Before any row is read: ``cite_cca`` trained again for each seed whose filtered
        evaluation is still to be made and whose run was restored from a record (records keep no
        weights). Its record is replaced, so every row of the table is the run that is filtered."""
        for seed in self.seeds:
            run = self.out("cite_cca", seed)
            if finished(self.out("cite_cca_filtered", seed), self.args.resume, self.records) or \
                    not finished(run, self.args.resume, self.records) or os.path.isfile(_final_model(run)):
                continue
            print(f"  {os.path.relpath(run, self.root)}: restored from its record without weights: trained again", flush=True)
            self._train("cite_cca", seed, on_detector, self.records, resume=False)

    def filtered(self, seed, tested_map):
        """``cite_cca``'s tested model of ``seed`` evaluated with phrase filtering (its record, or
        the evaluation of the weights :meth:`weights_for_filtering` made sure of). Its mAP without
        the filter must be ``tested_map``, the ``cite_cca`` run's own test mAP: otherwise the
        weights were another model's (an error naming both)."""
        out = self.out("cite_cca_filtered", seed)
        weights = ""
        if not finished(out, self.args.resume, self.records):
            weights = _final_model(self.out("cite_cca", seed))
        f = self.args.filter
        keys = ["MODEL.WEIGHTS", weights, "TEST.PHRASE_FILTER.RETRIEVAL_CONFIG", f["config"], "TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS",
                f["weights"], "TEST.PHRASE_FILTER.RETRIEVAL_OPTS", repr(list(f["opts"])), "TEST.PHRASE_FILTER.TOP_N", 75]
        results, _ = train_run("cite_cca_filtered", _config("cite_cca"), out, self.args.resume,
                               [*self.args.world_opts, *EVERY_RUN, *keys, "SEED", seed, *self.args.opts], ["--eval-only"],
                               self.records)
        unfiltered = results["phrase_detection_unfiltered"]["mAP"]
        if abs(unfiltered - tested_map) > 1e-6:
            raise SystemExit(f"{out}: evaluated unfiltered, its model has mAP {unfiltered:.4f}, but the cite_cca run of seed {seed} "
                             f"tested {tested_map:.4f}: the filtered model is not that run's (weights {weights or 'as recorded'}); "
                             "remove this evaluation (and its record) and the cite_cca run's folder, and run again")
        return {**_metrics(results), "unfiltered_mAP": unfiltered}

    def curve_files(self, models, seeds, suffix=""):
        """{model: [[stage-3 metrics.json, stage-3b metrics.json] per seed]} of the trained models."""
        return {m: [[os.path.join(self.out(m, s), stage + suffix, "metrics.json") for stage in STAGE3] for s in seeds]
                for m in models if MODELS[m][2] and m != "cite_cca_init" and m != "deep_cca"}


def schedule_table(comparison, models, seeds) -> str:
    """Per trained model and seed: the iteration each stage-3 phase stopped at (or its cap) and the
    selected model's phase and iteration."""
    from phrasedet.engine.model_selection import read_early_stop, read_selection

    lines = ["| model | seed | Adam phase stopped at | SGD phase stopped at | selected (phase, iteration, val. loc. acc.) |",
             "|---|---|---|---|---|"]
    for m in models:
        if not MODELS[m][2] or m in ("cite_cca_init", "deep_cca"):
            continue
        for s in seeds:
            run = comparison.out(m, s)
            stops = [read_early_stop(os.path.join(run, stage)) for stage in STAGE3]
            cells = [f"{x['iteration']} ({x['evaluations_without_gain']} val. without gain)" if x else "its cap" for x in stops]
            sel = read_selection(os.path.join(run, STAGE3[1])) or read_selection(os.path.join(run, STAGE3[0]))
            chosen = f"{sel['stage']}, {sel['iteration']}, {sel['value']:.1f}" if sel else "-"
            lines.append(f"| {m} | {s} | {cells[0]} | {cells[1]} | {chosen} |")
    return "\n".join(lines)


def training_words(dataset):
    """The words of the training phrases of ``dataset`` (what makes a zero-shot word unseen)."""
    from phrasedet.data.statistics import training_vocabulary

    return known_words(training_vocabulary([dataset]).phrases())


def filter_model(args):
    """The retrieval model of the filtering rows: {"config", "weights", "opts"}, or None."""
    if args.filter_weights == "none":
        return None
    config = os.path.join(ROOT, "configs", "retrieval", "two_branch.yaml")
    if args.filter_weights:
        return {"config": args.filter_config or config, "weights": args.filter_weights, "opts": args.filter_opts or []}
    root = os.path.join(args.output_root, "filter")
    weights = os.path.join(root, "cnn", "seed0", "two_branch", "model_best.pth")
    cnn = args.backbone_weights or KEPT_CNN
    if not args.records_only:  # --records-only needs no weights: its rows come from records
        # one process per detector shares the output root (docs/PHRASE_DETECTION.md): the first trains, the others wait
        with exclusive(os.path.join(args.output_root, ".filter.lock")):
            if not os.path.isfile(weights):
                run_tool("compare_retrieval.py", "--models", "two_branch", "--seeds", "0", "--representations", "cnn",
                         "--backbone-weights", cnn, "--output-root", root, "--world", args.world,
                         *(["--word-vectors", args.word_vectors] if args.word_vectors else []),
                         log=os.path.join(args.output_root, "filter.log"))
    text = [str(o) for o in [*get_world(args.world).retrieval_opts(), *word_vectors_opts(args)]]
    return {"config": config, "weights": weights,
            "opts": ["MODEL.RETRIEVAL.IMAGE_INPUT", "features", "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", cnn, *text]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-root", default="", help="default: output/phrase_detection_compare, with _<world> for a "
                   "world other than v3")
    p.add_argument("--detectors", type=int, nargs="+", default=[0, 1], help="SEED of each stage-1 detector")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="stage-3 SEEDs")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--resume", action="store_true")
    p.add_argument("--records-only", action="store_true", help="train nothing: the tables and verdicts of the runs recorded in "
                   "--record-root (the models with a record, the seeds every one of them has); implies --resume")
    p.add_argument("--record-root", default="", help="keep each finished run's record (and each detector) here and "
                   "restore from it (the project's: results/phrase_detection_compare)")
    p.add_argument("--filter-weights", default="none", help="a trained retrieval model for the phrase-filtering rows; "
                   "'' = train paper 000's embedding network on the built-in CNN; 'none' (default) = no filtering rows")
    p.add_argument("--filter-config", default="", help="that model's retrieval config (default: configs/retrieval/two_branch.yaml)")
    p.add_argument("--filter-opts", nargs="*", default=None, help="KEY VALUE overrides of that config")
    p.add_argument("--study", default="", help="put the runs in <output-root>/detector<d>/<STUDY>/ (and their records "
                   "likewise): a measurement beside the comparison on the same detectors, e.g. its budget")
    p.add_argument("--backbone-weights", default="", help="the CNN of the default filter model (default: results/builtin_cnn/backbone.pth)")
    add_word_vectors_argument(p)
    add_world_argument(p)
    p.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE config overrides for every run")
    args = p.parse_args(argv)
    if args.records_only and not args.record_root:
        p.error("--records-only needs --record-root")
    args.resume = args.resume or args.records_only
    world = get_world(args.world)
    args.output_root = args.output_root or os.path.join(ROOT, "output", "phrase_detection_compare" + world.suffix)
    # the world's keys come first, so a model's own (the untrained rows' empty SELECTION.DATASET) and the user's win
    args.world_opts, args.opts = world.phrase_detection_opts(), run_opts(args)
    print(f"world: {world.name} (test split {world.dataset('flickr30k_entities_test')})", flush=True)
    args.test_split = world.dataset("flickr30k_entities_test")
    args.known_words = training_words(world.dataset("flickr30k_entities_train"))
    text = word_vectors_digest(_config("cite_cca"), [*args.world_opts, *args.opts])
    print(word_vectors_line(args, _config("cite_cca"), [*args.world_opts, *args.opts], text), flush=True)
    args.filter = filter_model(args)
    start, summary = time.perf_counter(), {"world": world.name, "detectors": args.detectors, "seeds": args.seeds,
                                           "word_vectors": text, "runs": {}}
    for d in args.detectors:
        comparison = DetectorComparison(d, args)
        runs, ppa, minutes = comparison.run(text)
        files = comparison.curve_files(comparison.models, comparison.seeds)
        gaining = gaining_runs(files, [f"seed {s}" for s in comparison.seeds], "phrase_detection/loc_acc", LOC_TOLERANCE)
        verdicts = claim_verdicts(runs, gaining)
        print(f"\ndetector {d}: built-in test split {world.dataset('flickr30k_entities_test')} (150 images), stage-3 seeds "
              f"{', '.join(map(str, comparison.seeds))}, best validation model tested\n")
        print(format_table(runs, minutes))
        print("\nWith PPA-augmented positives (paper 003 Table V):\n")
        print(format_table({f"{m}_ppa": rs for m, rs in ppa.items()}))
        print()
        print(format_claims(verdicts))
        print("\nWith the phrase-presence oracle (a diagnostic, not a model: the detections of phrases absent from their "
              "image removed; docs/EVALUATION.md):\n")
        complete = {m: rs for m, rs in comparison.presence.items() if None not in rs}
        oracle = {f"{m}_presence_oracle": rs for m, rs in complete.items()}  # (names: no paper row)
        missing = [m for m in comparison.presence if m not in complete]
        print(format_table(oracle) + (f"\n(no test predictions kept: {', '.join(missing)})" if missing else ""))
        print()
        print(format_under_oracle(verdicts, claim_verdicts(complete)))
        print()
        print(schedule_table(comparison, comparison.models, comparison.seeds))
        split = {m: [zero_shot_split(a, args.known_words) for a in aps] for m, aps in comparison.aps.items() if None not in aps}
        print("\nThe zero-shot bucket split in two (phrasedet/engine/comparison/unseen_words.py):\n")
        print(format_zero_shot_split(split))
        title = f"Phrase detection, detector {d}: validation localization accuracy ({world.dataset('flickr30k_entities_val')})"
        print(draw_curves(files, os.path.join(comparison.base, "curves.png"), title, "phrase_detection/loc_acc",
                          LOC_TOLERANCE, "validation loc. acc. (%)"))
        for key, bucket in BUCKETS:
            draw_curves(files, os.path.join(comparison.base, f"curves_{key.split('_', 1)[1]}.png"),
                        f"{title}, {bucket} phrases", f"phrase_detection/loc_acc_{key.split('_', 1)[1]}", LOC_TOLERANCE,
                        f"validation loc. acc., {bucket} (%)")
        summary["runs"][f"detector{d}"] = {"runs": runs, "ppa": ppa, "presence_oracle": oracle, "minutes": minutes,
                                           "verdicts": verdicts, "seeds": comparison.seeds, "zero_shot_split": split}
    print(f"\n{(time.perf_counter() - start) / 60:.1f} min in all")
    os.makedirs(args.output_root, exist_ok=True)
    with open(os.path.join(args.output_root, f"comparison_{args.study}.json" if args.study else "comparison.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
