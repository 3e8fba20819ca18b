#!/usr/bin/env python
"""Stage-3 step cost on the region cache against the frozen detector run every step, on the same
batches (phrasedet/modeling/roi_heads/region_cache.py, ``PHRASEDET.RECIPE.REGION_CACHE``).

    python tools/benchmarks/benchmark_stage3.py --config-file configs/cite_cca.yaml --detector DETECTOR.pth
        [--iters 40] [--warmup 3] [--threads N] [--val-images N] [KEY VALUE ...]

Two copies of the config's stage-3 model are built in one process: the classifier of the config
(randomly initialized: the cost does not depend on its weights) on the frozen detector
``--detector`` (a stage-1 ``model_final.pth``), one with a region cache, one without (the
baseline: backbone, RPN and region head run every step). Both train with Adam on the same mapped
training batches (mapped once, before timing), alternating A B / B A; the cache is filled before
timing by one pass over the batches (its cost, once per image, is printed apart). Then each model
runs inference on the validation split's images (each image's own phrases, as stage 3 validates).
Reported: median and mean ms per step, the ratio, and the validation pass time both ways.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config-file", required=True, metavar="FILE")
    p.add_argument("--detector", required=True, help="a stage-1 detector (model_final.pth)")
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--val-images", type=int, default=0, help="validation images timed (0: the whole split)")
    p.add_argument("opts", nargs=argparse.REMAINDER)
    return p.parse_args(argv)


def stage3_model(cfg, detector, cached):
    """The config's classifier on the frozen detector (the recipe's stage 3), with or without a cache."""
    from detectron2.modeling import build_model

    from phrasedet.engine.staged.stages import freeze_all_but, load_weights
    from phrasedet.modeling.roi_heads.region_cache import RegionCache

    model = build_model(cfg)
    drop = ("roi_heads.classifier.",)
    load_weights(model, detector, drop=drop, may_miss=drop + ("roi_heads.shortlist.",))
    freeze_all_but(model, model.roi_heads.classifier)
    model.train()
    if cached:
        model.region_cache = RegionCache(model)
    return model


def main(argv=None):
    args = parse_args(argv)
    import torch
    from detectron2.config import get_cfg
    from detectron2.data import DatasetCatalog
    from detectron2.utils.events import EventStorage

    import phrasedet  # noqa: F401
    from phrasedet.config import add_phrasedet_config
    from phrasedet.data import PhraseDatasetMapper

    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    torch.manual_seed(0)
    mapper = PhraseDatasetMapper(cfg, is_train=True)
    records = DatasetCatalog.get(cfg.DATASETS.TRAIN[0])
    b = cfg.SOLVER.IMS_PER_BATCH
    n = args.iters + args.warmup
    batches = [[mapper(records[(k * b + i) % len(records)]) for i in range(b)] for k in range(n)]
    models = {"detector every step": stage3_model(cfg, args.detector, False),
              "region cache": stage3_model(cfg, args.detector, True)}
    opts = {k: torch.optim.Adam([p for p in m.parameters() if p.requires_grad], lr=cfg.PHRASEDET.RECIPE.CLASSIFIER_LR)
            for k, m in models.items()}
    start = time.perf_counter()
    models["region cache"].region_cache.lookup([x for batch in batches for x in batch])
    fill, filled = time.perf_counter() - start, len(models["region cache"].region_cache)
    times = {k: [] for k in models}
    with EventStorage():
        for it in range(n):
            order = list(models) if it % 2 == 0 else list(models)[::-1]
            for k in order:
                t = time.perf_counter()
                opts[k].zero_grad()
                sum(models[k](batches[it]).values()).backward()
                opts[k].step()
                if it >= args.warmup:
                    times[k].append(time.perf_counter() - t)
    val_records = DatasetCatalog.get(cfg.PHRASEDET.RECIPE.SELECTION.DATASET)
    val = [PhraseDatasetMapper(cfg, is_train=False)(r) for r in val_records[:args.val_images or len(val_records)]]
    passes = {}
    for k, m in models.items():
        m.eval()
        with torch.no_grad():
            m(val[:1])
            for _ in range(2):  # the cache's first pass computes the entries; the second reads them
                t = time.perf_counter()
                for x in val:
                    m([x])
                passes.setdefault(k, []).append(time.perf_counter() - t)
    base = statistics.median(times["detector every step"])
    print(f"{args.iters} steps of {b} images ({cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER}), {torch.get_num_threads()} threads; "
          f"cache filled for {filled} training images in {fill:.1f} s, once")
    print("| stage-3 step | median ms | mean ms | ratio to the detector run every step |")
    print("|---|---|---|---|")
    for k, ts in times.items():
        print(f"| {k} | {1000 * statistics.median(ts):.1f} | {1000 * statistics.mean(ts):.1f} | {statistics.median(ts) / base:.2f} |")
    print(f"\nvalidation pass ({len(val)} images, their own phrases): detector every step {passes['detector every step'][1]:.2f} s; "
          f"region cache {passes['region cache'][0]:.2f} s filling, {passes['region cache'][1]:.2f} s reading "
          f"({passes['region cache'][1] / passes['detector every step'][1]:.2f} of the detector's)")


if __name__ == "__main__":
    main()
