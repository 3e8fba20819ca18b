#!/usr/bin/env python
"""Pointing-game benchmarks (paper 004). Section ``evaluation``: throughput of the pointing-game
scoring at the paper's scale, 865,582 queries over 17,471 images (COCO val2014 x Visual Genome).
Section ``heatmap``: DSVE-loc's per-image and per-query localization cost at the paper's sizes,
next to the matrix-product bound of the same sizes (:func:`run_heatmap_section`).

    python tools/benchmarks/benchmark_pointing.py [--sections evaluation heatmap] [--images 17471] [--queries 865582]
        [--repeat 5] [--seed 0] [--end-to-end] [--maps 2400] [--map-side 13] [--topk 180] [--queries-per-image 50]

The ``evaluation`` section draws, seeded, image sizes (240 to 640 px a side), each query's image,
a box inside its image and a point anywhere in it (float64, original pixels), then measures in
one process:

(a) the baseline: one vectorized numpy ``(x > x1) & (x < x2) & (y > y1) & (y < y2)`` over all
    queries, and its count of hits (the released code's strict test, without its loop), on six
    contiguous coordinate arrays (its fastest input);
(b) ``phrasedet.evaluation.point_hits(points, boxes, "strict")`` and its count: one rule, on
    ``[Q, 2]`` points and ``[Q, 4]`` boxes held as the evaluator holds them (column-major);
(c) ``phrasedet.evaluation.evaluate_points``: the evaluator's whole scoring path once the points
    are in dataset order, i.e. the centre baseline's points, the three hit rules for the model
    and for the centre baseline, and the metrics dict;
(d) with ``--end-to-end``: ``PointingGameEvaluator.process`` of one points output per image on a
    registered synthetic split, then ``evaluate`` (building the split's records is not timed).

(a), (b), (c) are timed ``--repeat`` times, alternating (load from other processes hits all alike),
and the fastest of each is kept; (d) runs once. It prints queries/s and the time ratio of each
step to (a) (how many times the baseline's time; (c) does six rule evaluations where (a) does one),
checks that (a) and (b) count the same hits, and reports each step's peak memory above the memory
before it, measured in a separate untimed call with ``tracemalloc`` (which sees numpy's arrays).
Never asserted in tests (tests/evaluation/test_pointing_benchmark.py runs it tiny).

More sections: write ``run_<name>_section(args) -> dict`` (print as it goes, return the numbers),
add it to :data:`SECTIONS` and its options to :func:`parse_args`; ``--sections`` picks them.
"""
import argparse
import math
import time
import tracemalloc

import numpy as np

PAPER_IMAGES, PAPER_QUERIES = 17_471, 865_582


# ----------------------------------------------------------------------------- measuring
def peak_mb(fn) -> float:
    """Peak traced memory (MB) of one call of ``fn`` above the traced memory before it."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        return (tracemalloc.get_traced_memory()[1] - before) / 2.0 ** 20
    finally:
        tracemalloc.stop()


def fastest_alternating(fns, repeat: int):
    """Call each of ``fns`` in turn, ``repeat`` rounds: per function ``(last result, fastest seconds)``."""
    best, results = [math.inf] * len(fns), [None] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            results[i] = fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return list(zip(results, best))


# ----------------------------------------------------------------------------- data
def synthetic_split(num_images: int, num_queries: int, seed: int = 0):
    """``(image_sizes float64 [N, 2] as (H, W), query_counts int64 [N], boxes float64 [Q, 4],
    points float64 [Q, 2])``: queries image by image; boxes inside their image, points anywhere in it."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(240, 641, (num_images, 2)).astype(np.float64)
    counts = rng.multinomial(num_queries, np.full(num_images, 1.0 / num_images)).astype(np.int64)
    size = np.repeat(sizes, counts, axis=0)
    h, w = size[:, 0], size[:, 1]
    corner = rng.random((num_queries, 2)) * size[:, ::-1]
    extent = rng.random((num_queries, 2)) * (size[:, ::-1] - corner)
    boxes = np.concatenate([corner, corner + extent], axis=1)
    points = rng.random((num_queries, 2)) * np.stack([w, h], axis=1)
    return sizes, counts, boxes, points


def synthetic_ground_truth(name: str, sizes, counts, boxes):
    from phrasedet.evaluation import PointingGroundTruth

    return PointingGroundTruth(name, [f"img{n}" for n in range(len(sizes))], sizes,
                               [f"q{q}" for q in range(len(boxes))], ["thing"] * len(boxes), boxes, counts)


# ----------------------------------------------------------------------------- section: evaluation
def coordinate_columns(points: np.ndarray, boxes: np.ndarray):
    """``(x, y, x1, y1, x2, y2)``, each a contiguous float64 [Q] array: the baseline's input."""
    return tuple(np.ascontiguousarray(a[:, k]) for a, n in ((points, 2), (boxes, 4)) for k in range(n))


def baseline_strict(x, y, x1, y1, x2, y2) -> int:
    """(a): the single vectorized strict test and its count of hits."""
    return int(np.count_nonzero((x > x1) & (x < x2) & (y > y1) & (y < y2)))


def _end_to_end(args, sizes, counts, boxes, points):
    """(d): (seconds, metrics) of the evaluator's process + evaluate on a registered synthetic split."""
    from detectron2.data import DatasetCatalog

    from phrasedet.evaluation import PointingGameEvaluator

    name = f"benchmark_pointing_{args.images}_{args.queries}_{args.seed}"
    starts = np.concatenate([[0], np.cumsum(counts)])
    records = [{"image_id": f"img{n}", "height": int(sizes[n, 0]), "width": int(sizes[n, 1]),
                "queries": [{"text": "thing", "phrase": "thing", "bbox": b, "query_id": f"q{q}"}
                            for q, b in enumerate(boxes[starts[n]:starts[n + 1]].tolist(), start=int(starts[n]))]}
               for n in range(len(sizes))]
    if name not in DatasetCatalog.list():
        DatasetCatalog.register(name, lambda: records)
    evaluator = PointingGameEvaluator(name)
    outputs = [{"points": points[starts[n]:starts[n + 1]]} for n in range(len(sizes))]
    start = time.perf_counter()
    for record, output in zip(records, outputs):
        evaluator.process([{"image_id": record["image_id"]}], [output])
    metrics = evaluator.evaluate()["pointing"]
    return time.perf_counter() - start, metrics


def run_evaluation_section(args) -> dict:
    """Measure (a), (b), (c) (and (d)); print and return queries/s, ratios and peak memory."""
    from phrasedet.evaluation import PointingProtocol, evaluate_points, point_hits

    sizes, counts, boxes, points = synthetic_split(args.images, args.queries, args.seed)
    gt = synthetic_ground_truth("synthetic", sizes, counts, boxes)
    columns = coordinate_columns(points, boxes)
    held = np.asfortranarray(points)  # as the evaluator holds its points (and the split its boxes, gt.boxes)
    protocol = PointingProtocol()
    print(f"== evaluation: {args.queries:,} queries over {args.images:,} images (paper: {PAPER_QUERIES:,} over "
          f"{PAPER_IMAGES:,}), synthetic, seed {args.seed}; main protocol: {protocol.describe()}")
    steps = {"a": ("(a) baseline: one numpy (x > x1) & (x < x2) & (y > y1) & (y < y2)",
                   lambda: baseline_strict(*columns)),
             "b": ("(b) point_hits(points, boxes, 'strict')",
                   lambda: int(np.count_nonzero(point_hits(held, gt.boxes)))),
             "c": ("(c) evaluate_points: centre baseline, 3 rules x 2, metrics",
                   lambda: evaluate_points(gt, held, protocol)[0]["pointing"])}
    timed = dict(zip(steps, fastest_alternating([fn for _, fn in steps.values()], args.repeat)))
    rows = {k: (label, timed[k][1], peak_mb(fn)) for k, (label, fn) in steps.items()}
    if args.end_to_end:
        seconds, end_to_end = _end_to_end(args, sizes, counts, boxes, points)
        rows["d"] = (f"(d) PointingGameEvaluator.process x {args.images:,} + evaluate", seconds, float("nan"))
    base = rows["a"][1]
    for label, seconds, mb in rows.values():
        print(f"{label:64s} {seconds * 1e3:9.1f} ms  {args.queries / seconds:14,.0f} queries/s  "
              f"x{seconds / base:6.2f} the baseline's time  peak {mb:7.1f} MB")
    metrics = timed["c"][0]
    same = timed["a"][0] == timed["b"][0] == round(metrics["accuracy_strict"] * args.queries / 100.0)
    print(f"strict hits (a) vs (b) vs (c): {'equal' if same else 'DIFFERENT'} ({timed['a'][0]:,} hits, "
          f"{metrics['accuracy_strict']:.2f}%; centre baseline {metrics['centre_accuracy_strict']:.2f}%)")
    out = {"queries_per_second": {k: args.queries / r[1] for k, r in rows.items()},
           "ratio_to_baseline": {k: r[1] / base for k, r in rows.items()},
           "peak_mb": {k: r[2] for k, r in rows.items() if k != "d"}, "same_hits": same, "metrics": metrics}
    if args.end_to_end:
        out["end_to_end_metrics"] = end_to_end
    return out


def released_heatmap(projected, v, k: int):
    """The released code's heatmap of one text, for comparison: its top-k coordinates by value,
    the selected maps weighted by |v_u| and summed, ``projected`` [D, h*w], ``v`` [D]."""
    index = v.topk(k).indices
    return (projected[index] * v[index].abs()[:, None]).sum(dim=0)


def run_heatmap_section(args) -> dict:
    """DSVE-loc's localization cost at the paper's sizes (2,400 maps of 13 x 13, k = 180):

    (e) per image, Eq. 8: ``project_maps`` (A [E, D'] on the maps [D', h, w]) against the bound, a
        ``torch.mm`` of the same sizes;
    (f) per query, Eq. 9 and the point: ``text_heatmaps`` + ``heatmap_points`` for the image's
        queries at once (``--queries-per-image``, paper: 865,582 / 17,471 = 50) against the bound,
        the dense matrix product [Q, E] x [E, h*w], and against the released code's per-text
        top-k gather and sum (:func:`released_heatmap`), one text at a time.
    """
    import torch

    from phrasedet.modeling.heatmap import heatmap_points, project_maps, text_heatmaps

    torch.manual_seed(args.seed)
    d, e, side, k, q = args.maps, args.maps, args.map_side, args.topk, args.queries_per_image
    maps, weight = torch.randn(d, side, side), torch.randn(e, d) / d ** 0.5
    texts = torch.nn.functional.normalize(torch.randn(q, e), dim=1)
    projected = project_maps(maps, weight)
    flat = projected.reshape(e, -1)
    dense = torch.zeros(q, e)
    print(f"== heatmap: {d:,} maps of {side} x {side}, embedding {e:,}, k = {k}, {q} queries per image, "
          f"{torch.get_num_threads()} threads")
    steps = {"e_bound": ("(e) bound: torch.mm [E, D'] x [D', h*w]", lambda: weight.mm(maps.reshape(d, -1))),
             "e": ("(e) project_maps, once per image", lambda: project_maps(maps, weight)),
             "f_bound": (f"(f) bound: torch.mm [{q}, E] x [E, h*w]", lambda: dense.mm(flat)),
             "f": ("(f) text_heatmaps + heatmap_points, the image's queries at once",
                   lambda: heatmap_points(text_heatmaps(projected, texts, k), (416, 416), "corner")),
             "f_released": ("(f) released code: top-k gather and sum, one text at a time",
                            lambda: [released_heatmap(flat, v, k) for v in texts])}
    with torch.no_grad():
        timed = dict(zip(steps, fastest_alternating([fn for _, fn in steps.values()], args.repeat)))
        same = torch.allclose(text_heatmaps(projected, texts, k).reshape(q, -1), torch.stack(timed["f_released"][0]), atol=1e-4)
    per = {"e_bound": 1, "e": 1, "f_bound": q, "f": q, "f_released": q}
    bound = {"e": "e_bound", "e_bound": "e_bound", "f": "f_bound", "f_bound": "f_bound", "f_released": "f_bound"}
    for key, (label, _) in steps.items():
        seconds = timed[key][1]
        print(f"{label:64s} {seconds * 1e6 / per[key]:10.1f} us per {'image' if per[key] == 1 else 'query'}  "
              f"x{seconds / timed[bound[key]][1]:6.2f} the bound's time")
    print(f"heatmaps equal to the released algorithm's: {'yes' if same else 'NO'}")
    return {"us_per_unit": {key: timed[key][1] * 1e6 / per[key] for key in steps},
            "ratio_to_bound": {key: timed[key][1] / timed[bound[key]][1] for key in steps}, "same_heatmaps": same}


SECTIONS = {"evaluation": run_evaluation_section, "heatmap": run_heatmap_section}


# ----------------------------------------------------------------------------- command line
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=list(SECTIONS))
    parser.add_argument("--images", type=int, default=PAPER_IMAGES, help="images (paper: 17,471)")
    parser.add_argument("--queries", type=int, default=PAPER_QUERIES, help="queries (paper: 865,582)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds of (a), (b), (c), alternating; fastest kept")
    parser.add_argument("--maps", type=int, default=2400, help="heatmap: maps D' = embedding size E (paper: 2,400)")
    parser.add_argument("--map-side", type=int, default=13, help="heatmap: side of the map (paper's code: 416 / 32 = 13)")
    parser.add_argument("--topk", type=int, default=180, help="heatmap: k (paper: 180)")
    parser.add_argument("--queries-per-image", type=int, default=50, help="heatmap: queries per image (paper: 865,582 / 17,471)")
    parser.add_argument("--end-to-end", action="store_true",
                        help="also time the evaluator's process + evaluate on a registered synthetic split (d)")
    args = parser.parse_args(argv)
    if min(args.images, args.queries, args.repeat) < 1:
        parser.error("--images, --queries and --repeat must be >= 1")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    return {name: SECTIONS[name](args) for name in args.sections}


if __name__ == "__main__":
    main()
