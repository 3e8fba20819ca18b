#!/usr/bin/env python
"""Train and evaluate phrasedet models with Detectron2's usual command line:

    python tools/train_net.py --config-file configs/cite_cca.yaml [--num-gpus N] [--eval-only]
        [--resume] [KEY VALUE ...]

Every task family trains here: phrase detection (``configs/*.yaml``, ``PhraseRCNN``),
image-sentence retrieval (``configs/retrieval/*.yaml``, ``ImageTextEmbedding``) and the pointing
game (``configs/pointing/*.yaml``, ``DSVELoc``); the splits' ``evaluator_type`` picks the loaders
and the evaluator. A config with ``PHRASEDET.RECIPE.ENABLED``
runs paper 003's staged recipe (detector, CCA, classifier, optional fine-tuning; see
``phrasedet/engine/staged/recipe.py``) and one with ``PHRASEDET.RETRIEVAL_STAGES.ENABLED`` paper 001's
two stages (``phrasedet/engine/staged/retrieval_stages.py``), ``--resume`` continuing in the
interrupted stage; other configs train one model. ``--num-gpus N`` starts N processes; on a machine without a GPU they train on the
CPU with gloo.
"""
import json
import logging
import os

import torch
from detectron2.config import get_cfg
from detectron2.engine import default_argument_parser, default_setup, launch
from detectron2.utils import comm
from detectron2.utils.logger import setup_logger

import phrasedet  # noqa: F401  (registers datasets and models)
from phrasedet.config import add_phrasedet_config
from phrasedet.data.datasets import EVALUATOR_TYPE, POINTING_EVALUATOR_TYPE
from phrasedet.engine import (PhrasedetTrainer, build_recipe_model, dataset_task, finish_distributed, run_recipe,
                              run_retrieval_stages, run_selected, selection_of)
from phrasedet.engine.trainer import caption_records
from phrasedet.modeling.checkpoint import PhrasedetCheckpointer
from phrasedet.utils import save_pointing_visualizations, save_test_visualizations


def setup(args):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    if not torch.cuda.is_available() and cfg.MODEL.DEVICE.startswith("cuda"):
        cfg.MODEL.DEVICE = "cpu"
    cfg.freeze()
    default_setup(cfg, args)
    setup_logger(cfg.OUTPUT_DIR, distributed_rank=comm.get_rank(), name="phrasedet", abbrev_name="phrasedet")
    return cfg


def visualize(cfg, model, num_images=4):
    """Pictures (main process): when the first test split is a phrase-detection one, its first
    images with their phrases' detections; for a ``DSVELoc`` model, the heatmaps of the first
    ``TEST.POINTING.NUM_VISUALIZE`` queries of each pointing split."""
    if not comm.is_main_process():
        return
    model, log = getattr(model, "module", model), logging.getLogger("phrasedet")
    tasks = {name: dataset_task(name) for name in cfg.DATASETS.TEST}
    if cfg.DATASETS.TEST and tasks[cfg.DATASETS.TEST[0]] == EVALUATOR_TYPE:
        out = os.path.join(cfg.OUTPUT_DIR, "visualizations")
        paths = save_test_visualizations(cfg, model, cfg.DATASETS.TEST[0], out, num_images)
        log.info("Saved %d pictures of test detections in %s", len(paths), out)
    for name in (n for n, task in tasks.items() if task == POINTING_EVALUATOR_TYPE and hasattr(model, "heatmaps")):
        out = os.path.join(cfg.OUTPUT_DIR, "visualizations", name)
        paths = save_pointing_visualizations(cfg, model, name, out, cfg.TEST.POINTING.NUM_VISUALIZE,
                                             records=caption_records(cfg, [name]))
        log.info("Saved %d heatmap pictures of %s in %s", len(paths), name, out)


def main(args):
    results = run(args)
    finish_distributed()  # every process, once all are done (not on an error: peers would wait)
    return results


def run(args):
    cfg = setup(args)
    recipe = cfg.PHRASEDET.RECIPE.ENABLED
    if args.eval_only:
        model = build_recipe_model(cfg) if recipe else PhrasedetTrainer.build_model(cfg)
        PhrasedetCheckpointer.from_config(cfg, model, cfg.OUTPUT_DIR).resume_or_load(cfg.MODEL.WEIGHTS, resume=args.resume)
        results = PhrasedetTrainer.test(cfg, model)
        visualize(cfg, model)
        write_results(cfg, results, cfg.MODEL.WEIGHTS)
        return results
    if recipe:
        model, results = run_recipe(cfg, resume=args.resume)
        visualize(cfg, model)
        return results
    if cfg.PHRASEDET.RETRIEVAL_STAGES.ENABLED:
        model, results, final_model = run_retrieval_stages(cfg, resume=args.resume)
        write_results(cfg, results, final_model)
        return results
    if selection_of(cfg) is not None:  # validated periodically; the best model is tested
        model, results, selected = run_selected(cfg, resume=args.resume)
        visualize(cfg, model)
        write_results(cfg, results, selected)
        return results
    trainer = PhrasedetTrainer(cfg)
    trainer.resume_or_load(resume=args.resume)
    trainer.train()  # evaluates at the end (EvalHook), and every TEST.EVAL_PERIOD iterations if > 0
    visualize(cfg, trainer.model)
    results = getattr(trainer, "_last_eval_results", None)
    write_results(cfg, results, os.path.join(cfg.OUTPUT_DIR, "model_final.pth"))
    return results


def write_results(cfg, results, final_model):
    """``<OUTPUT_DIR>/results.json``: the final evaluation and the evaluated model's path (main
    process), as the recipe writes it, for tools that compare runs."""
    if comm.is_main_process() and results:
        with open(os.path.join(cfg.OUTPUT_DIR, "results.json"), "w") as f:
            json.dump({"final_model": final_model, "results": results}, f, indent=1)


if __name__ == "__main__":
    args = default_argument_parser().parse_args()
    launch(main, args.num_gpus, num_machines=args.num_machines, machine_rank=args.machine_rank, dist_url=args.dist_url, args=(args,))
