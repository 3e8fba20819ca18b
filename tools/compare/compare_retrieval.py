#!/usr/bin/env python
"""Papers 002, 000 and 001's retrieval claims on the built-in dataset, in one command:

    python tools/compare/compare_retrieval.py [--output-root output/retrieval_compare] [--seeds 0 1 2]
        [--representations cnn oracle] [--backbone-weights PATH | none] [--word-vectors PATH] [--budget 3000]
        [--finetune-budget 600] [--val-period 100] [--resume] [--models vse0 vsepp ...] [--world v3|long_tail]
        [KEY VALUE ...]

Every model of ``configs/retrieval/`` is trained for each seed on each image representation, then
the table (mean ± standard deviation over the seeds) and one verdict per claim are printed per
representation (``phrasedet/engine/comparison/retrieval_claims.py``) and written to
``<output-root>/comparison.json``; the validation curves are drawn in
``<output-root>/<representation>/learning_curves.png``.

Representations (``--representations``; docs/RETRIEVAL.md, "The built-in experiment"):

* ``cnn``: the built-in pretrained CNN, the stand-in for ImageNet weights (a CNN trained to
  classify the objects of a pretraining split of its own, ``configs/pretraining/builtin_cnn.yaml``;
  trained once into ``$PHRASEDET_CACHE``, about 20 minutes), or ``--backbone-weights`` (``none``:
  random). Its pooled features of every image are computed once (``<rep>/features``).
* ``oracle``: the oracle representation, the number of objects matching every desc of the scene
  (``phrasedet/data/synthetic/oracle.py``): an upper bound, not a model. There is no CNN to
  fine-tune: the fine-tuned rows and paper 001's second stage are left out, and paper 001's
  stage-I models train on it alone.
* ``oracle_common`` (not run by default; a diagnosis of paper 001's stage I, docs/RETRIEVAL.md): the
  oracle without the columns that are zero in every training image or nonzero in at most 5 of
  them (phrasedet/evaluation/retrieval/instance_fit.py), so that no column names a few training
  images. Run like the oracle.

Runs (one ``train_net.py`` each, ``--resume`` reuses finished ones):

1. frozen representation: vse0, vsepp, vsepp_warmup and clip (reference rows), two_branch,
   two_branch_no_nbr, similarity_net, for ``--budget`` iterations with the learning rate divided
   by 10 at its middle; "untrained" is VSE0's model evaluated as initialized (chance);
2. fine-tuned (cnn): vse0_ft and vsepp_ft continue each selected frozen VSE0 / VSE++ model on pixels
   with the CNN's last stage trained, ``--finetune-budget`` iterations at 2e-5 (halved budget drop);
3. paper 001 (``configs/retrieval/instance_loss*.yaml``): on the cnn, stage I on its features for
   ``--budget`` iterations and stage II on pixels for ``--finetune-budget`` (instance_loss,
   ranking_only, no_shift), one_stage for both together on pixels; the stage-I models are
   evaluated too (``<name>_stage1``); on the oracle, the stage-I models alone.

``--world long_tail`` puts every run in the long-tailed built-in world (the same images, captions
in the long-tailed language, GloVe vectors: phrasedet/engine/comparison/worlds.py).

Every run validates on ``builtin_flickr30k_captions_val`` (its world's) every ``--val-period`` iterations and
tests its best validation snapshot (``PHRASEDET.SELECTION``). Extra ``KEY VALUE`` pairs go to every run.
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

from phrasedet.engine.comparison.protocol import (REPRESENTATIONS, budget_opts, dataset_flags, draw_curves,  # noqa: E402
                                         common_oracle_features, oracle_features, pretrained_cnn, representation_records, selection_opts,
                                         add_word_vectors_argument, config_of, run_opts, word_vectors_digest, word_vectors_line,
                                         selected_weights)
from phrasedet.engine.comparison.worlds import WORLDS, add_world_argument, get_world  # noqa: E402
from phrasedet.engine.comparison.retrieval_claims import claim_verdicts, format_claims, format_seed_table  # noqa: E402
from phrasedet.engine.comparison.runs import finished, run_tool, train_run  # noqa: E402

FROZEN = ["vse0", "vsepp", "vsepp_warmup", "clip", "two_branch", "two_branch_no_nbr", "similarity_net"]
TUNED = {"vse0_ft": "vse0", "vsepp_ft": "vsepp"}
# paper 001: model name -> config; the stage-I models of STAGE1_EVALUATED are evaluated too
INSTANCE = {"instance_loss": "instance_loss", "ranking_only": "instance_loss_ranking_only",
            "one_stage": "instance_loss_one_stage", "no_shift": "instance_loss_no_shift"}
STAGE1_EVALUATED = ("instance_loss", "ranking_only", "no_shift")
MODELS = ["untrained"] + FROZEN + list(TUNED) + list(INSTANCE)
SPLITS = WORLDS["v3"].caption_splits()  # (train, val, test) of the default world; --world: that world's
FINETUNE_LR = 2e-5  # VSE++: the second half's learning rate, kept while the CNN is fine-tuned


def _config(name):
    return os.path.join(ROOT, "configs", "retrieval", f"{name}.yaml")


def extract_features(root, weights, resume, opts, splits=SPLITS):
    """The CNN's pooled features of every split into ``<root>/features``."""
    out = os.path.join(root, "features")
    if not (resume and os.path.isfile(os.path.join(out, "extractor.pth"))):
        run_tool("extract_image_features.py", "--config-file", _config("vsepp"), "--output-dir", out, *dataset_flags(splits),
                 "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", weights, *opts)
    return out


def train(name, config, out, resume, opts, flags=(), records=None):
    """One train_net run of ``configs/retrieval/<config>.yaml``: (retrieval metrics, minutes)."""
    results, minutes = train_run(name, _config(config), out, resume, opts, flags, records)
    return results["retrieval"], minutes


def stage1_config_opts(config: str, budget: int):
    """Paper 001's stage I of ``config`` as a run of its own on a frozen representation: the
    stage's loss weight, learning rate and ``budget``, no second stage."""
    s = config_of(_config(config)).PHRASEDET.RETRIEVAL_STAGES
    return ["PHRASEDET.RETRIEVAL_STAGES.ENABLED", False, "MODEL.RETRIEVAL.LOSS.WEIGHT", s.STAGE1_LOSS_WEIGHT,
            "MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS", -1, "SOLVER.BASE_LR", s.STAGE1_LR, *budget_opts(budget)]


class Comparison:
    """The runs of one representation: ``<root>/seed<s>/<model>``."""

    def __init__(self, rep, root, features, weights, args, records=None):
        self.rep, self.root, self.features, self.weights, self.args = rep, root, features, weights, args
        self.on_features = ["MODEL.RETRIEVAL.IMAGE_INPUT", "features", "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR", features]
        self.select = selection_opts(args.splits[1], args.val_period)
        self.records = records

    def train(self, name, config, out, opts, flags=(), resume=None):
        """:func:`train` with this comparison's ``--resume`` (unless ``resume`` says) and records."""
        return train(name, config, out, self.args.resume if resume is None else resume, opts, flags, self.records)

    def weights_of(self, out, retrain, stage=""):
        """The weights the run in ``out`` selected (in its ``stage`` folder, when given); when it was
        restored from its record (which keeps no weights) and a later run needs them, ``retrain()``
        trains it again first."""
        selected = os.path.join(out, stage)
        if self.records is not None and self.records.read(out) is not None:
            try:
                kept = os.path.isfile(selected_weights(selected))
            except FileNotFoundError:
                kept = False
            if not kept:
                print(f"  {os.path.relpath(out, self.root)}: restored from its record without weights: trained again",
                      flush=True)
                retrain()
        return selected_weights(selected)

    def models(self):
        allowed = MODELS if self.rep == "cnn" else ["untrained"] + FROZEN + list(STAGE1_EVALUATED)
        return [m for m in self.args.models if m in allowed]

    def run_seed(self, seed):
        """Every model for one seed: {name: (metrics, minutes or None)}."""
        a, base = self.args, os.path.join(self.root, f"seed{seed}")
        seed_opts, done = ["SEED", seed, *a.opts], {}
        models = self.models()
        if "untrained" in models:  # the chance level: VSE0's model as initialized, evaluated
            done["untrained"] = self.train("untrained", "vse0", os.path.join(base, "untrained"),
                                           [*self.on_features, *seed_opts], flags=["--eval-only"])

        def frozen_run(name, resume=None):
            return self.train(name, name, os.path.join(base, name),
                              [*self.on_features, *budget_opts(a.budget), *self.select, *seed_opts], resume=resume)

        for name in (m for m in models if m in FROZEN):
            done[name] = frozen_run(name)
        for name in (m for m in models if m in TUNED):
            out, parent = os.path.join(base, name), TUNED[name]
            if finished(out, a.resume, self.records):
                frozen = ""  # restored or kept: not trained again
            else:
                frozen = self.weights_of(os.path.join(base, parent), lambda: done.update({parent: frozen_run(parent, False)}))
            done[name] = self.train(name, f"{parent}_ft", out,
                                    ["MODEL.WEIGHTS", frozen, "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", self.weights,
                                     "MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS", 0, *budget_opts(a.finetune_budget),
                                     "SOLVER.BASE_LR", FINETUNE_LR, *self.select, *seed_opts])
        for name in (m for m in models if m in INSTANCE):
            done.update(self.run_instance_loss(name, base, seed_opts))
        return done

    def run_instance_loss(self, name, base, seed_opts):
        """Paper 001's ``name``: {name: (metrics, minutes)[, name_stage1: (metrics, None)]} on the
        cnn; on the oracle, the stage-I model alone {name_stage1: (metrics, minutes)}."""
        a, out = self.args, os.path.join(base, name)
        if self.rep != "cnn":
            return {f"{name}_stage1": self.train(f"{name}_stage1", INSTANCE[name], out,
                                                 [*self.on_features, *stage1_config_opts(INSTANCE[name], a.budget),
                                                  *self.select, *seed_opts])}
        # stage I on the CNN's features when it has trained weights (a random CNN: on pixels, frozen)
        on_features = ["PHRASEDET.RETRIEVAL_STAGES.STAGE1_IMAGE_FEATURES_DIR", self.features] if self.weights else []
        stages = [*on_features, "PHRASEDET.RETRIEVAL_STAGES.STAGE1_ITERS", a.budget, "PHRASEDET.RETRIEVAL_STAGES.STAGE1_STEPS",
                  f"[{a.budget // 2}]", *budget_opts(a.finetune_budget)]
        if name == "one_stage":  # both losses and the fine-tuned CNN from the start, the iterations of both stages
            stages = budget_opts(a.budget + a.finetune_budget)
        opts = ["MODEL.RETRIEVAL.BACKBONE_WEIGHTS", self.weights, *stages, *self.select, *seed_opts]
        done = {name: self.train(name, INSTANCE[name], out, opts)}
        if name in STAGE1_EVALUATED:
            evaluation = os.path.join(out, "stage1_eval")
            stage1 = "" if finished(evaluation, a.resume, self.records) else self.weights_of(
                out, lambda: done.update({name: self.train(name, INSTANCE[name], out, opts, resume=False)}),
                stage="stage1_frozen_cnn")
            metrics, _ = self.train(f"{name}_stage1", INSTANCE[name], evaluation,
                                    ["MODEL.WEIGHTS", stage1, "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", self.weights, *seed_opts],
                                    flags=["--eval-only"])
            done[f"{name}_stage1"] = (metrics, None)  # an evaluation: its time is not a run's
        return done

    def curves(self, seeds):
        """{model: [metrics.json of each seed's run]} of the runs that trained with selection."""
        files = {}
        for model in self.models():
            if model == "untrained":
                continue
            for seed in seeds:
                run = os.path.join(self.root, f"seed{seed}", model)
                if model in INSTANCE and self.rep == "cnn":
                    files.setdefault(f"{model}, stage I", []).append(os.path.join(run, "stage1_frozen_cnn", "metrics.json"))
                    files.setdefault(model, []).append(os.path.join(run, "stage2_finetune", "metrics.json"))
                else:
                    files.setdefault(model if model not in INSTANCE else f"{model}_stage1", []).append(
                        os.path.join(run, "metrics.json"))
        return files


def representation_inputs(rep, root, args):
    """(features folder, CNN weights or '') of a representation."""
    if rep == "oracle":
        return oracle_features(root, args.resume, language=get_world(args.world).language)["global"], ""
    if rep == "oracle_common":
        return common_oracle_features(root, args.resume, language=get_world(args.world).language), ""
    weights = pretrained_cnn(args.backbone_weights)
    print(f"image CNN: {weights or 'random initialization'}", flush=True)
    return extract_features(root, weights, args.resume, args.opts, args.splits), weights


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-root", default="", help="default: output/retrieval_compare, with _<world> for a world "
                   "other than v3")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    p.add_argument("--representations", nargs="+", default=list(REPRESENTATIONS), choices=(*REPRESENTATIONS, "oracle_common"),
                   help="default: cnn oracle; oracle_common (a diagnosis, issue 43): the oracle without its columns "
                        "nonzero in at most 5 training images")
    p.add_argument("--backbone-weights", default="", help="the CNN (default: the built-in pretrained CNN); 'none': random")
    p.add_argument("--budget", type=int, default=3000, help="iterations of every model trained on a frozen representation")
    p.add_argument("--finetune-budget", type=int, default=600, help="iterations of every run that fine-tunes the CNN")
    p.add_argument("--val-period", type=int, default=100, help="iterations between two validations")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--record-root", default="", help="keep each finished run's record here and restore from it "
                   "(phrasedet/engine/comparison/run_records.py; the project's: results/retrieval_compare)")
    add_word_vectors_argument(p)
    add_world_argument(p)
    p.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE config overrides for every run")
    args = p.parse_args(argv)
    world = get_world(args.world)
    args.output_root = args.output_root or os.path.join(ROOT, "output", "retrieval_compare" + world.suffix)
    args.opts, args.splits = run_opts(args, world.retrieval_opts()), world.caption_splits()
    print(f"world: {world.name} (captions {', '.join(args.splits)})", flush=True)
    text = word_vectors_digest(_config("vse0"), args.opts)
    print(word_vectors_line(args, _config("vse0"), args.opts, text), flush=True)
    start, summary = time.perf_counter(), {"seeds": args.seeds, "budget": args.budget,
                                           "finetune_budget": args.finetune_budget, "word_vectors": text,
                                           "representations": {}}
    for rep in args.representations:
        root = os.path.join(args.output_root, rep)
        features, weights = representation_inputs(rep, root, args)
        records = representation_records(root, args.record_root, rep, weights,
                                         os.path.join(features, f"{args.splits[0]}.npy"), word_vectors=text)
        comparison = Comparison(rep, root, features, weights, args, records)
        runs, minutes = {}, {}
        for seed in args.seeds:
            print(f"{rep}, seed {seed}", flush=True)
            for name, (metrics, spent) in comparison.run_seed(seed).items():
                runs.setdefault(name, []).append(metrics)
                if spent is not None:
                    minutes.setdefault(name, []).append(spent)
        mean_minutes = {m: sum(v) / len(v) for m, v in minutes.items()}
        verdicts = claim_verdicts(runs)
        print(f"\n{rep}: built-in test split {args.splits[2]} (150 images, 750 captions), seeds {', '.join(map(str, args.seeds))}, "
              f"budget {args.budget} (fine-tuning {args.finetune_budget}), best validation snapshot tested\n")
        print(format_seed_table(runs, mean_minutes))
        print()
        print(format_claims(verdicts))
        plateaus = draw_curves(comparison.curves(args.seeds), os.path.join(root, "learning_curves.png"),
                               f"Retrieval, {rep}: validation rsum ({args.splits[1]})")
        print(plateaus)
        summary["representations"][rep] = {"backbone_weights": weights, "features": features, "runs": runs,
                                           "minutes": mean_minutes, "verdicts": verdicts}
    summary["caption_specificity"] = caption_specificity(args.opts)
    print(f"\n{(time.perf_counter() - start) / 60:.1f} min in all")
    os.makedirs(args.output_root, exist_ok=True)
    with open(os.path.join(args.output_root, "comparison.json"), "w") as f:
        json.dump(summary, f, indent=1)


def caption_specificity(opts):
    """Of how many other images in a training batch a training caption is true (a false negative
    for the losses), from the built-in scenes (phrasedet/data/synthetic/specificity.py); None when
    the training split is not the built-in one."""
    from phrasedet.data.datasets.builtin import builtin_dataset_root, builtin_language_of
    from phrasedet.data.synthetic.specificity import dataset_specificity

    cfg = config_of(_config("vsepp"), opts)
    language = builtin_language_of(cfg.DATASETS.TRAIN[0]) if len(cfg.DATASETS.TRAIN) == 1 else None
    if language is None or not cfg.DATASETS.TRAIN[0].endswith("captions_train"):
        return None
    out = dataset_specificity(builtin_dataset_root(language), cfg.SOLVER.IMS_PER_BATCH, splits=["train"],
                              brute_force=False)["train"]
    print(f"\nCaption specificity (built-in training split, batches of {cfg.SOLVER.IMS_PER_BATCH} images): a caption "
          f"is true of {out['mean_in_batch']:.3f} other images of its batch on average; "
          f"{100 * out['share_in_batch']:.1f} % of captions are true of at least one.")
    return out


if __name__ == "__main__":
    main()
