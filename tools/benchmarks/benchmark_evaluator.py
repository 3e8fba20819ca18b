#!/usr/bin/env python
"""Time and peak memory of the phrase-detection evaluator's core on synthetic data.

    python tools/benchmarks/benchmark_evaluator.py [--scales flickr,referit] [--k 1] [--mode reference]

Scales: ``flickr`` = 1,000 test images x 5,000 phrases, ``referit`` = 10,000 x 32,000 (the size of
the paper's test vocabularies). Each scale runs in its own subprocess, so its peak memory is its
own. The synthetic test set has ~1.5 ground-truth instances per phrase (every phrase at least one,
images drawn at random), random boxes; every image scores every phrase (random scores, K per
phrase) as an open-vocabulary model does, and the detections of annotated phrases are noisy copies
of the ground-truth boxes so that there are true positives. Training counts put phrases in the
three buckets at random.

Reported: ``fill`` = the ``PhraseDetections.add_image`` calls the evaluator makes (one per image;
generating the random scores is not counted), ``evaluate`` = ``evaluate_phrase_detection`` +
``summarize``; ``peak RSS`` = the process' maximum resident memory (``getrusage``), ``core`` =
that minus the resident memory before the detections were allocated (the imports of torch and
Detectron2 that ``import phrasedet`` pulls in are in the former, not in the latter).
Not a test.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

SCALES = {"flickr": (1000, 5000), "referit": (10000, 32000)}


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def run_scale(num_images: int, num_phrases: int, k: int, mode: str, seed: int = 0) -> dict:
    import numpy as np

    from phrasedet.evaluation import PhraseDetections, PhraseGroundTruth, evaluate_phrase_detection
    from phrasedet.text.vocab import PhraseVocabulary

    rng = np.random.default_rng(seed)
    N, V = num_images, num_phrases
    G = int(1.5 * V)
    gt_phrase = np.concatenate([np.arange(V), rng.integers(0, V, G - V)])
    gt_image = rng.integers(0, N, G)
    xy = rng.uniform(0, 400, (G, 2))
    gt_box = np.concatenate([xy, xy + rng.uniform(20, 100, (G, 2))], axis=1)
    phrases = [f"phrase {j:05d}" for j in range(V)]
    gt = PhraseGroundTruth([str(100000 + i) for i in range(N)], phrases, gt_image, gt_phrase, gt_box)
    train_counts = rng.choice([0, 5, 500], size=V, p=[0.4, 0.45, 0.15])
    vocabulary = PhraseVocabulary(dict(zip(phrases, train_counts.tolist())))

    rss_before = _rss_mb()
    t_fill = 0.0
    dets = None
    boxes = np.empty((V, k, 4), dtype=np.float32)
    xy = rng.uniform(0, 400, (V, k, 2)).astype(np.float32)
    boxes[..., :2], boxes[..., 2:] = xy, xy + 50
    for i in range(N):
        scores = rng.random((V, k), dtype=np.float32)
        pairs = gt.pairs_of_image(i)
        first = gt.pair_first_gt[pairs]
        noisy = gt.gt_box[first][:, None, :] + rng.normal(0, 8, (len(first), k, 4))
        rows = gt.pair_phrase[pairs]
        saved = boxes[rows].copy()
        boxes[rows] = noisy
        t0 = time.perf_counter()
        if dets is None:
            dets = PhraseDetections(gt, k)
        dets.add_image(i, scores, boxes)
        t_fill += time.perf_counter() - t0
        boxes[rows] = saved
    t0 = time.perf_counter()
    result = evaluate_phrase_detection(gt, dets, mode=mode)
    metrics = result.summarize(vocabulary)
    t_eval = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {"images": N, "phrases": V, "k": k, "instances": G, "mode": mode, "fill_s": t_fill, "evaluate_s": t_eval,
            "peak_rss_mb": peak, "core_mb": peak - rss_before, "mAP": metrics["mAP"], "loc_acc": metrics["loc_acc"],
            "scores_matrix_mb": dets.scores.nbytes / 2**20}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="flickr,referit", help="comma-separated: " + ",".join(SCALES))
    parser.add_argument("--k", type=int, default=1, help="detections per (image, phrase)")
    parser.add_argument("--mode", default="reference", choices=("reference", "standard"))
    parser.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args._worker:
        n, v = SCALES[args._worker]
        print(json.dumps(run_scale(n, v, args.k, args.mode)))
        return
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    for scale in args.scales.split(","):
        if scale not in SCALES:
            parser.error(f"unknown scale {scale!r}; choose from {list(SCALES)}")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--_worker", scale, "--k", str(args.k),
                               "--mode", args.mode], env=env, capture_output=True, text=True)
        if proc.returncode:
            sys.stderr.write(proc.stderr)
            sys.exit(proc.returncode)
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{scale:8s} {r['images']:>6,d} images x {r['phrases']:>6,d} phrases x K={r['k']} "
              f"({r['instances']:,d} GT instances, mode={r['mode']}): fill {r['fill_s']:.2f} s, "
              f"evaluate {r['evaluate_s']:.2f} s, total {r['fill_s'] + r['evaluate_s']:.2f} s; "
              f"peak RSS {r['peak_rss_mb']:.0f} MB (core {r['core_mb']:.0f} MB, score matrix "
              f"{r['scores_matrix_mb']:.0f} MB); synthetic mAP {r['mAP']:.2f}, loc acc {r['loc_acc']:.2f}")


if __name__ == "__main__":
    main()
