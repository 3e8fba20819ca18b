#!/usr/bin/env python
"""Papers 002, 000 and 001's retrieval claims on the built-in dataset, in one command:

    python tools/compare_retrieval.py [--output-root output/retrieval_compare] [--seeds 0 1 2]
        [--backbone-weights PATH | none] [--resume] [--models vse0 vsepp ...] [KEY VALUE ...]

Every model of ``configs/retrieval/`` is trained with the same budget (``Base-Retrieval.yaml``)
for each seed, then the table (mean ± standard deviation over the seeds) and one verdict per claim
are printed (``phrasedet/engine/retrieval_claims.py``) and written to ``<output-root>/comparison.json``.

1. The image CNN, the built-in stand-in for ImageNet weights (none can be downloaded here), is the
   ResNet-18 of a phrase-aware detector trained on the training images' phrase boxes:
   ``--backbone-weights`` (default: the main job's ``output/cite_cca/stage1_detector/model_final.pth``
   when it exists, else ``configs/qa_rcnn.yaml`` is trained into ``<output-root>/detector``, the
   same detector); ``none`` keeps the CNN's random initialization.
2. Its pooled features of every image are computed once (``tools/extract_image_features.py``);
   the frozen-CNN models train on them (VSE++'s "1C" setting): vse0, vsepp, two_branch,
   two_branch_no_nbr, similarity_net, and two reference rows, vsepp_warmup (VSE++ after
   VSE-infinity's one-epoch warm-up with the sum of hinges) and clip (CLIP's InfoNCE loss);
   "untrained" is VSE0's model evaluated as initialized (chance).
3. The fine-tuned rows (vse0_ft, vsepp_ft) continue each frozen VSE0 / VSE++ model on pixels with
   the whole CNN trained (VSE++: 15 more epochs at 2e-5 after 30 with a fixed CNN);
   ``configs/retrieval/vsepp_ft.yaml`` is the same schedule in one run.
4. Paper 001's rows train on pixels from that CNN, each in two stages in one run
   (``configs/retrieval/instance_loss*.yaml``): instance_loss (stage I instance loss with the CNN
   frozen, stage II instance + ranking loss with the CNN's last stage fine-tuned), ranking_only
   (the ranking loss in both stages), one_stage (instance + ranking loss from the start, same
   iterations), no_shift (no position shift). The stage-I model of instance_loss, ranking_only and
   no_shift is evaluated too (rows ``<name>_stage1``, as the paper's Tables 2 and 6).

``--resume`` reuses every run whose ``results.json`` exists. Extra ``KEY VALUE`` pairs go to every run.
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from phrasedet.engine.retrieval_claims import claim_verdicts, format_claims, format_seed_table  # noqa: E402
from phrasedet.engine.runs import detector_checkpoint, run_tool, train_run  # noqa: E402

FROZEN = ["vse0", "vsepp", "vsepp_warmup", "clip", "two_branch", "two_branch_no_nbr", "similarity_net"]
TUNED = {"vse0_ft": "vse0", "vsepp_ft": "vsepp"}
# paper 001: model name -> config; the stage-I models of STAGE1_EVALUATED are evaluated too
INSTANCE = {"instance_loss": "instance_loss", "ranking_only": "instance_loss_ranking_only",
            "one_stage": "instance_loss_one_stage", "no_shift": "instance_loss_no_shift"}
STAGE1_EVALUATED = ("instance_loss", "ranking_only", "no_shift")
MODELS = ["untrained"] + FROZEN + list(TUNED) + list(INSTANCE)


def _config(name):
    return os.path.join(ROOT, "configs", "retrieval", f"{name}.yaml")


def extract_features(root, weights, resume, opts):
    out = os.path.join(root, "features")
    if not (resume and os.path.isfile(os.path.join(out, "extractor.pth"))):
        run_tool("extract_image_features.py", "--config-file", _config("vsepp"), "--output-dir", out,
                "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", weights, *opts)
    return out


def train(name, config, out, resume, opts, flags=()):
    """One train_net run of ``configs/retrieval/<config>.yaml``: (retrieval metrics, minutes)."""
    results, minutes = train_run(name, _config(config), out, resume, opts, flags)
    return results["retrieval"], minutes


def run_instance_loss(name, base, features, weights, resume, seed_opts):
    """Paper 001's ``name`` (two stages in one run; stage I, with the CNN frozen, on its features
    when it has trained weights), and its stage-I model evaluated:
    {name: (metrics, minutes)[, name_stage1: (metrics, None)]}."""
    out = os.path.join(base, name)
    on_features = ["PHRASEDET.RETRIEVAL_STAGES.STAGE1_IMAGE_FEATURES_DIR", features] if weights else []
    done = {name: train(name, INSTANCE[name], out, resume, ["MODEL.RETRIEVAL.BACKBONE_WEIGHTS", weights, *on_features, *seed_opts])}
    if name in STAGE1_EVALUATED:
        stage1 = os.path.join(out, "stage1_frozen_cnn", "model_final.pth")
        metrics, _ = train(f"{name}_stage1", INSTANCE[name], os.path.join(out, "stage1_eval"), resume,
                           ["MODEL.WEIGHTS", stage1, "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", weights, *seed_opts], flags=["--eval-only"])
        done[f"{name}_stage1"] = (metrics, None)  # an evaluation: its time is not a run's
    return done


def run_seed(seed, models, root, features, weights, resume, opts, finetune):
    """Every model for one seed: {name: (metrics, minutes or None)}; ``finetune`` = (iterations, lr)."""
    base = os.path.join(root, f"seed{seed}")
    seed_opts = ["SEED", seed, *opts]
    done = {}
    on_features = ["MODEL.RETRIEVAL.IMAGE_INPUT", "features", "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR", features]
    if "untrained" in models:  # the chance level: VSE0's model as initialized, evaluated
        done["untrained"] = train("untrained", "vse0", os.path.join(base, "untrained"), resume, [*on_features, *seed_opts],
                                  flags=["--eval-only"])
    for name in (m for m in models if m in FROZEN):
        done[name] = train(name, name, os.path.join(base, name), resume, [*on_features, *seed_opts])
    for name in (m for m in models if m in TUNED):
        frozen = os.path.join(base, TUNED[name], "model_final.pth")
        if not os.path.isfile(frozen):
            raise FileNotFoundError(f"{name} continues {TUNED[name]}: train it first (list it in --models)")
        done[name] = train(name, f"{TUNED[name]}_ft", os.path.join(base, name), resume,
                           ["MODEL.WEIGHTS", frozen, "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", weights,
                            "MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS", 0, "SOLVER.STEPS", "()", *seed_opts,
                            "SOLVER.MAX_ITER", finetune[0], "SOLVER.BASE_LR", finetune[1]])
    for name in (m for m in models if m in INSTANCE):
        done.update(run_instance_loss(name, base, features, weights, resume, seed_opts))
    return done


def ft_schedule():
    """``(iterations, learning rate)`` of the fine-tuning part of ``vsepp_ft.yaml``: its iterations
    after unfreezing, at the learning rate its one-run schedule has then."""
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(_config("vsepp_ft"))
    start = cfg.MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS
    return cfg.SOLVER.MAX_ITER - start, cfg.SOLVER.BASE_LR * cfg.SOLVER.GAMMA ** sum(s <= start for s in cfg.SOLVER.STEPS)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-root", default=os.path.join(ROOT, "output", "retrieval_compare"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    p.add_argument("--backbone-weights", default="", help="a detector checkpoint, or 'none' for a random CNN")
    p.add_argument("--finetune-iters", type=int, default=None,
                   help="iterations of the fine-tuned rows (default: vsepp_ft.yaml's, after unfreezing)")
    p.add_argument("--resume", action="store_true")
    p.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE config overrides for every run")
    args = p.parse_args(argv)
    start = time.perf_counter()
    iters, lr = ft_schedule()
    finetune = (iters if args.finetune_iters is None else args.finetune_iters, lr)
    weights = detector_checkpoint(args.backbone_weights, args.output_root, args.resume)
    print(f"image CNN: {weights or 'random initialization'}", flush=True)
    needs_features = any(m not in INSTANCE for m in args.models) or bool(weights)
    features = extract_features(args.output_root, weights, args.resume, args.opts) if needs_features else None
    runs, minutes = {}, {}
    for seed in args.seeds:
        print(f"seed {seed}", flush=True)
        for name, (metrics, spent) in run_seed(seed, args.models, args.output_root, features, weights, args.resume, args.opts,
                                                  finetune).items():
            runs.setdefault(name, []).append(metrics)
            if spent is not None:
                minutes.setdefault(name, []).append(spent)
    mean_minutes = {m: sum(v) / len(v) for m, v in minutes.items()}
    verdicts = claim_verdicts(runs)
    print(f"\nBuilt-in test split (150 images, 750 captions), seeds {', '.join(map(str, args.seeds))}; "
          f"{(time.perf_counter() - start) / 60:.1f} min in all\n")
    print(format_seed_table(runs, mean_minutes))
    print()
    print(format_claims(verdicts))
    specificity = caption_specificity(args.opts)
    with open(os.path.join(args.output_root, "comparison.json"), "w") as f:
        json.dump({"seeds": args.seeds, "backbone_weights": weights, "runs": runs, "minutes": mean_minutes,
                   "verdicts": verdicts, "caption_specificity": specificity}, f, indent=1)


def caption_specificity(opts):
    """Of how many other images in a training batch a training caption is true (a false negative
    for the losses), from the built-in scenes (phrasedet/data/synthetic/specificity.py); None when
    the training split is not the built-in one."""
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config
    from phrasedet.data.datasets.builtin import builtin_dataset_root
    from phrasedet.data.synthetic.specificity import dataset_specificity

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(_config("vsepp"))
    cfg.merge_from_list(list(opts))
    if tuple(cfg.DATASETS.TRAIN) != ("builtin_flickr30k_captions_train",):
        return None
    out = dataset_specificity(builtin_dataset_root(), cfg.SOLVER.IMS_PER_BATCH, splits=["train"])["train"]
    print(f"\nCaption specificity (built-in training split, batches of {cfg.SOLVER.IMS_PER_BATCH} images): a caption "
          f"is true of {out['mean_in_batch']:.3f} other images of its batch on average; "
          f"{100 * out['share_in_batch']:.1f} % of captions are true of at least one.")
    return out


if __name__ == "__main__":
    main()
