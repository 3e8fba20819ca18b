#!/usr/bin/env python
"""Training-step cost of PhraseRCNN against Detectron2's plain Faster R-CNN, on the same batches.

    python tools/benchmarks/benchmark_training.py --config-file configs/qa_rcnn.yaml [--iters 20] [--warmup 3]
        [--threads N] [--seed 0] [KEY VALUE ...]

Both models are built from the same config, in the same process, and trained on the same mapped
batches of the config's training set:

- ``phrase``: the config's ``PhraseRCNN`` (phrase-agnostic RPN, phrase-conditioned ROI heads),
  ``INPUT.PHRASES.MAX_PER_IMAGE`` (5) phrases per image: only images with at least that many
  distinct phrases are used, so every image really asks about 5 phrases;
- ``faster_rcnn``: ``GeneralizedRCNN`` + ``StandardROIHeads`` with ``NUM_CLASSES`` 1 (the mapper's
  ``gt_classes`` are zeros: one "phrase region" class), the same backbone, RPN, pooler and
  ``ROI_BOX_HEAD`` on the same feature, ``ROI_HEADS.BATCH_SIZE_PER_IMAGE`` =
  ``ROIS_PER_PHRASE`` x phrases per image (the phrase model's region budget) unless given.
  Its backbone, RPN and box head start from the phrase model's weights.

A step is forward + backward + SGD step (``build_optimizer``/``build_lr_scheduler`` of the config,
so warm-up included); data loading is outside the timed region (the batches are mapped once,
before timing). The two models alternate A B / B A on successive iterations so drift (thermal,
allocator, other load) hits both alike. Reported: mean and median ms per step, the ratio, ROIs
through the box head per image, and peak RSS (per model when the kernel lets us reset the high
water mark, ``/proc/self/clear_refs``; else the process peak) with ``step +MiB``, the most a
single step of that model raised RSS over its value at the step's start (activations and
gradients; memory the allocator kept from the other model's step is reused, so it is a lower
bound). Other processes on the machine inflate the mean and max: read the median.
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
    p.add_argument("--iters", type=int, default=20, help="timed steps per model")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per model first")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: all cores)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rois-per-image", type=int, default=0,
                   help="Faster R-CNN ROI_HEADS.BATCH_SIZE_PER_IMAGE (0: ROIS_PER_PHRASE x phrases per image)")
    p.add_argument("opts", nargs=argparse.REMAINDER, metavar="KEY VALUE", help="config overrides")
    args = p.parse_args(argv)
    if args.iters < 1 or args.warmup < 0 or args.threads < 0:
        p.error("--iters must be >= 1, --warmup and --threads >= 0")
    return args


# ----------------------------------------------------------------------------- memory
def _rss_kib(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss():
    """Reset the kernel's peak-RSS counter (VmHWM); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _process_peak_kib():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


# ----------------------------------------------------------------------------- set-up
def setup_cfgs(args):
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    cfg.MODEL.DEVICE = "cpu" if cfg.MODEL.DEVICE.startswith("cuda") and not _cuda() else cfg.MODEL.DEVICE
    cfg.freeze()

    phrases = cfg.INPUT.PHRASES.MAX_PER_IMAGE
    plain = cfg.clone()
    plain.defrost()
    plain.MODEL.META_ARCHITECTURE = "GeneralizedRCNN"
    plain.MODEL.ROI_HEADS.NAME = "StandardROIHeads"
    plain.MODEL.ROI_HEADS.NUM_CLASSES = 1
    plain.MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE = args.rois_per_image or cfg.MODEL.PHRASE_ROI_HEADS.ROIS_PER_PHRASE * phrases
    plain.freeze()
    return cfg, plain


def _cuda():
    import torch

    return torch.cuda.is_available()


def make_batches(cfg, num_batches, seed):
    """``num_batches`` mapped training batches of IMS_PER_BATCH images with >= MAX_PER_IMAGE phrases."""
    import numpy as np
    import torch
    from detectron2.data import DatasetCatalog

    from phrasedet.data import PhraseDatasetMapper

    want = cfg.INPUT.PHRASES.MAX_PER_IMAGE
    dicts = []
    for name in cfg.DATASETS.TRAIN:
        dicts.extend(DatasetCatalog.get(name))
    full = [d for d in dicts if len({a["phrase"] for a in d.get("annotations", ())}) >= want]
    if not full:
        raise SystemExit(f"no training image has {want} distinct phrases")
    np.random.seed(seed)
    torch.manual_seed(seed)
    mapper = PhraseDatasetMapper(cfg, is_train=True)
    bs = cfg.SOLVER.IMS_PER_BATCH
    batches = [[mapper(full[(b * bs + i) % len(full)]) for i in range(bs)] for b in range(num_batches)]
    return batches, len(full), len(dicts)


def build_models(cfg, plain_cfg, seed):
    import torch
    from detectron2.modeling import build_model
    from detectron2.solver import build_lr_scheduler, build_optimizer

    torch.manual_seed(seed)
    phrase = build_model(cfg)
    torch.manual_seed(seed)
    plain = build_model(plain_cfg)
    # same starting weights for everything the two share: backbone, RPN, box head
    shared = {f"backbone.{k}": v for k, v in phrase.backbone.state_dict().items()}
    shared.update({f"proposal_generator.{k}": v for k, v in phrase.proposal_generator.state_dict().items()})
    shared.update({f"roi_heads.box_head.{k}": v for k, v in phrase.roi_heads.region_features.head.state_dict().items()})
    missing = set(shared) - set(plain.state_dict())
    if missing:
        raise SystemExit(f"the two models do not share {sorted(missing)[:5]}...: different backbone/RPN/box head?")
    plain.load_state_dict(shared, strict=False)
    out = {}
    for name, model, c in (("phrase", phrase, cfg), ("faster_rcnn", plain, plain_cfg)):
        model.train()
        opt = build_optimizer(c, model)
        out[name] = {"model": model, "opt": opt, "sched": build_lr_scheduler(c, opt), "times": [], "rois": [],
                     "peak_kib": 0, "step_kib": 0, "losses": []}
    return out


def _count_rois(entry, head):
    def hook(_module, inputs, _output):
        entry["_rois"] += int(inputs[0].shape[0])

    entry["_rois"] = 0
    return head.register_forward_hook(hook)


def train_step(entry, batch, storage):
    import torch

    model, opt = entry["model"], entry["opt"]
    entry["_rois"] = 0
    t0 = time.perf_counter()
    losses = model(batch)
    total = sum(losses.values())
    opt.zero_grad(set_to_none=True)
    total.backward()
    opt.step()
    dt = time.perf_counter() - t0
    entry["sched"].step()
    storage.step()
    loss = float(total.detach())
    if not torch.isfinite(torch.tensor(loss)):
        raise SystemExit(f"non-finite loss in {model.__class__.__name__}: {losses}")
    return dt, loss


def main(argv=None):
    args = parse_args(argv)
    import torch
    from detectron2.utils.events import EventStorage

    import phrasedet  # noqa: F401  (registers PhraseRCNN, its heads and the datasets)

    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    cfg, plain_cfg = setup_cfgs(args)
    total = args.warmup + args.iters
    batches, n_full, n_all = make_batches(cfg, total, args.seed)
    entries = build_models(cfg, plain_cfg, args.seed)
    hooks = [_count_rois(entries["phrase"], entries["phrase"]["model"].roi_heads.region_features.head),
             _count_rois(entries["faster_rcnn"], entries["faster_rcnn"]["model"].roi_heads.box_head)]
    peak_before_kib = _process_peak_kib()  # read before resetting: the reset lowers it too
    can_reset = _reset_peak_rss()
    base_kib = _rss_kib("VmRSS")

    storages = {name: EventStorage(0) for name in entries}
    torch.manual_seed(args.seed)
    for it, batch in enumerate(batches):
        order = ("phrase", "faster_rcnn") if it % 2 == 0 else ("faster_rcnn", "phrase")
        for name in order:
            e = entries[name]
            if can_reset:
                _reset_peak_rss()
                start_kib = _rss_kib("VmRSS") or 0
            with storages[name]:
                dt, loss = train_step(e, batch, storages[name])
            if can_reset:
                hwm = _rss_kib("VmHWM") or 0
                e["peak_kib"] = max(e["peak_kib"], hwm)
                e["step_kib"] = max(e["step_kib"], hwm - start_kib)
            if it >= args.warmup:
                e["times"].append(dt * 1000)
                e["rois"].append(e["_rois"] / len(batch))
                e["losses"].append(loss)
    for h in hooks:
        h.remove()

    bs = cfg.SOLVER.IMS_PER_BATCH
    phrases_per_img = statistics.mean(len(d["phrases"]) for b in batches for d in b)
    print()
    print(f"config {args.config_file}; {threads} torch threads; seed {args.seed}; device {cfg.MODEL.DEVICE}")
    print(f"batches: {total} x {bs} images ({n_full} of {n_all} training images have >= "
          f"{cfg.INPUT.PHRASES.MAX_PER_IMAGE} phrases), {phrases_per_img:.2f} phrases per image; "
          f"sizes {sorted({tuple(d['image'].shape[1:]) for b in batches for d in b})}")
    print(f"timed steps per model: {args.iters} (after {args.warmup} warm-up), alternating A-B / B-A")
    print(f"phrase: {cfg.MODEL.META_ARCHITECTURE} + {cfg.MODEL.ROI_HEADS.NAME} "
          f"({cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER}, ROIS_PER_PHRASE {cfg.MODEL.PHRASE_ROI_HEADS.ROIS_PER_PHRASE}, "
          f"region head {cfg.MODEL.PHRASE_ROI_HEADS.REGION_HEAD})")
    print(f"faster_rcnn: GeneralizedRCNN + StandardROIHeads (NUM_CLASSES 1, BATCH_SIZE_PER_IMAGE "
          f"{plain_cfg.MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE}, {plain_cfg.MODEL.ROI_BOX_HEAD.NAME})")
    print(f"shared: ResNet-{cfg.MODEL.RESNETS.DEPTH} {cfg.MODEL.RESNETS.OUT_FEATURES}, RPN post-NMS "
          f"{cfg.MODEL.RPN.POST_NMS_TOPK_TRAIN}, {cfg.MODEL.ROI_BOX_HEAD.NAME} x{cfg.MODEL.ROI_BOX_HEAD.NUM_FC} "
          f"FC {cfg.MODEL.ROI_BOX_HEAD.FC_DIM}, pooler {cfg.MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION}")
    print()
    peak_label = "peak RSS MiB" if can_reset else "peak RSS MiB (process)"
    header = (f"{'model':<12} {'mean ms':>9} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'ROIs/img':>9} "
              f"{peak_label:>14} {'step +MiB':>10}")
    print(header)
    print("-" * len(header))
    proc_peak = max([peak_before_kib, _process_peak_kib()] + [e["peak_kib"] for e in entries.values()])
    for name, e in entries.items():
        peak = e["peak_kib"] if can_reset else proc_peak
        print(f"{name:<12} {statistics.mean(e['times']):9.1f} {statistics.median(e['times']):10.1f} "
              f"{min(e['times']):8.1f} {max(e['times']):8.1f} {statistics.mean(e['rois']):9.1f} {peak / 1024:14.0f} "
              f"{e['step_kib'] / 1024 if can_reset else float('nan'):10.0f}")
    a, b = entries["phrase"]["times"], entries["faster_rcnn"]["times"]
    ratio_mean, ratio_median = statistics.mean(a) / statistics.mean(b), statistics.median(a) / statistics.median(b)
    print("-" * len(header))
    print(f"ratio phrase / faster_rcnn: mean {ratio_mean:.2f}x, median {ratio_median:.2f}x "
          f"(target <= 1.5x: {'met' if ratio_median <= 1.5 else 'NOT met'})")
    print(f"RSS before the timed loop {base_kib / 1024 if base_kib else float('nan'):.0f} MiB; "
          f"process peak {proc_peak / 1024:.0f} MiB (both models, data, batches and set-up)")
    print(f"last loss: phrase {entries['phrase']['losses'][-1]:.3f}, faster_rcnn {entries['faster_rcnn']['losses'][-1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
