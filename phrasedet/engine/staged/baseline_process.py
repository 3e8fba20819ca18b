"""The recipe's random-initialization baseline (``PHRASEDET.RECIPE.COMPARE_RANDOM_INIT``) trained in
a second process beside the CCA-initialized classifier (``PHRASEDET.RECIPE.BASELINE_PROCESS``).

Stage 3 trains a small classifier on cached region features, which gains little from a second
thread, so two such trainings side by side were meant to finish in about the time of one. Measured
on 2 cores they do not (the second process ran at 0.17 s per iteration, this one at 0.11-0.13,
against about 0.055 for one process alone: docs/DECISIONS.md), so it is off by default and in every
config; the cause is not found. The second process runs exactly the stages the first
would run after its own (:func:`~.recipe.random_init_stages`, the same detector, the CCA read from
``stage2_cca/cca.npz``, the same seeds: each stage seeds itself), logs to
``<OUTPUT_DIR>/log_random_init.txt`` and hands back its test results and final model through a JSON
file. ``--resume`` means the same in it. A failure of the second process is an error naming its log.
"""
import json
import logging
import multiprocessing
import os
from typing import Tuple

__all__ = ["BASELINE_LOG", "start_baseline", "join_baseline"]

logger = logging.getLogger("phrasedet.recipe")

BASELINE_LOG = "log_random_init.txt"
_RESULT = "random_init_results.json"


def _worker(cfg_text: str, detector_weights: str, resume: bool, threads: int) -> None:
    import torch
    from detectron2.config import CfgNode, get_cfg
    from detectron2.utils.logger import setup_logger

    import phrasedet  # noqa: F401  (registers the datasets, models and weights addresses)
    from phrasedet.config import add_phrasedet_config
    from phrasedet.modeling.cca import load_cca_layers

    from .recipe import CCALayers, cca_path, random_init_stages, train_and_test

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_other_cfg(CfgNode.load_cfg(cfg_text))
    cfg.freeze()
    log = os.path.join(cfg.OUTPUT_DIR, BASELINE_LOG)
    for name, abbrev in (("detectron2", "d2"), ("phrasedet", "phrasedet"), ("fvcore", "fvcore")):
        setup_logger(log, name=name, abbrev_name=abbrev, color=False, configure_stdout=False)
    torch.set_num_threads(threads)
    stages = random_init_stages(cfg, detector_weights, CCALayers(load_cca_layers(cca_path(cfg))))
    _, results, final_model = train_and_test(cfg, stages, resume)
    with open(os.path.join(cfg.OUTPUT_DIR, _RESULT), "w") as f:
        json.dump({"final_model": final_model, "results": results}, f)


def start_baseline(cfg, detector_weights: str, resume: bool):
    """Start the baseline's process (after stage 2 wrote ``cca.npz``) with half of this process's
    threads, and keep the other half here. Returns the process."""
    import torch

    threads = torch.get_num_threads()
    mine = max(1, threads - threads // 2)
    result = os.path.join(cfg.OUTPUT_DIR, _RESULT)
    if os.path.isfile(result):
        os.remove(result)  # an earlier run's
    process = multiprocessing.get_context("spawn").Process(
        target=_worker, args=(cfg.dump(), detector_weights, resume, max(1, threads // 2)), name="random_init_baseline")
    process.start()
    torch.set_num_threads(mine)
    logger.info("Random-initialization baseline: training in a second process (%d thread(s), log %s); this one keeps %d",
                max(1, threads // 2), os.path.join(cfg.OUTPUT_DIR, BASELINE_LOG), mine)
    process.threads_before = threads
    return process


def join_baseline(cfg, process) -> Tuple[dict, str]:
    """Wait for the baseline's process; this process gets its threads back. Returns (its test
    results, its final model's path).

    Raises:
        RuntimeError: naming the log, when the process failed.
    """
    import torch

    process.join()
    torch.set_num_threads(process.threads_before)
    result = os.path.join(cfg.OUTPUT_DIR, _RESULT)
    if process.exitcode != 0 or not os.path.isfile(result):
        raise RuntimeError(f"the random-initialization baseline's process failed (exit code {process.exitcode}): see "
                           f"{os.path.join(cfg.OUTPUT_DIR, BASELINE_LOG)}")
    with open(result) as f:
        out = json.load(f)
    os.remove(result)
    return out["results"], out["final_model"]
