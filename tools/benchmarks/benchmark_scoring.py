#!/usr/bin/env python
"""Cost of open-vocabulary scoring per region classifier: a whole vocabulary (default 5,000
phrases) against the regions of one image (default 300), next to one matrix product of the same
sizes ([P, D_r] @ [D_r, R]) and to the machine's matrix-product rate, both measured in the same run.

    python tools/benchmarks/benchmark_scoring.py                 # paper 003's sizes: D_r 2053, D_t 6000, code widths
    python tools/benchmarks/benchmark_scoring.py --sizes builtin # the built-in configs' sizes
    python tools/benchmarks/benchmark_scoring.py --phrases 500 --regions 50 --repeats 1   # quick
    python tools/benchmarks/benchmark_scoring.py --classifiers CITEClassifier --cascade-k  # CITE and the phrase filter only

For each classifier it reports the phrase-side work done once per vocabulary (``encode_phrases``)
and the per-image work (``score_encoded`` over the vocabulary in batches of ``--batch`` phrases,
as ``PhraseROIHeads`` does), the ratio of the per-image time to the matrix product, and the peak
resident memory of a fresh process that did only that classifier. Each row also gives the
per-image floating-point work its model requires (:func:`scoring_flops`: 2 m n k per matrix product
of its layers, counted analytically, the phrase side excluded), the GFLOP/s that achieves, and
that rate as a fraction of the machine's matrix-product rate: the best of repeated GEMMs
[M, E] @ [E, J] (M = batch x regions pairs, at most 16,384; E, J the CITE embedding and joint
widths), CITE's main product, measured in the same run. ``CITE + cascade k`` is CITE
scoring only the k best regions per phrase by the CCA cosine (``MODEL.PHRASE_ROI_HEADS.CASCADE_TOPK``).
Weights are random: the cost does not depend on their values.

Then the cost of **phrase filtering** per test image (paper 003 Sec. 6.2,
``phrasedet/engine/phrase_filtering.py``), next to the per-image scoring above: the image's
embedding against ``--filter-sentences`` sentence embeddings (default 148,915, Flickr30K's
29,783 training images x 5; ``--filter-dim`` 512, paper 000's), the top ``--filter-top-n`` (100),
the union of their tokens (``PhraseFilter.from_retrieved``, sentences of 12 tokens drawn from 8,000)
and the kept phrases of the vocabulary (its token index); next to the one matrix product
``[1, d] @ [d, M]`` and to CITE's full-vocabulary scoring of the same run (printed when CITE is
among ``--classifiers``). The image's own
embedding (one CNN pass) is not included: it is timed with the retrieval encoders
(``tools/benchmarks/benchmark_retrieval.py --sections encoding``).
"""
import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np
import torch

SIZES = {
    # paper 003: 2048-d res5 feature + 5-d geometry, 6000-d HGLMM phrase vectors; the code's widths
    "paper": dict(region_dim=2053, phrase_dim=6000, hidden=2053, embed=1024, joint=1024, concept=256, concepts=4),
    # configs/Base-Recipe.yaml: 256-d fc feature + 5, 100-d word2vec
    "builtin": dict(region_dim=261, phrase_dim=100, hidden=100, embed=100, joint=256, concept=64, concepts=4),
}
MAX_GEMM_ROWS = 16384  # the matrix-product baseline's rows: 64 MB at E = 1024, past where the rate levels off
CLASSIFIERS = ["QARCNNClassifier", "CCAClassifier", "EmbeddingNetClassifier", "CITEClassifier"]


def _cfg(s):
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    h = cfg.MODEL.PHRASE_ROI_HEADS
    h.EMBEDDING_NET.HIDDEN_DIM, h.EMBEDDING_NET.EMBED_DIM = s["hidden"], s["embed"]
    h.CITE.HIDDEN_DIM, h.CITE.EMBED_DIM, h.CITE.JOINT_DIM, h.CITE.CONCEPT_DIM = s["hidden"], s["embed"], s["joint"], s["concept"]
    h.CITE.NUM_CONCEPTS = s["concepts"]
    return cfg


def _branch_flops(s, n):
    """A two-layer branch (FC D_r -> H, FC H -> E) on n regions."""
    return 2 * n * (s["region_dim"] * s["hidden"] + s["hidden"] * s["embed"])


def _cca_dim(s):
    return min(s["region_dim"], s["phrase_dim"])  # the random CCA of :func:`build`


def cite_pair_flops(s, pairs):
    """CITE's layers on ``pairs`` (phrase, region) pairs: joint FC E -> J, K concept FCs J -> C,
    the concept-weighted final FC (K C multiply-adds)."""
    kc = s["concepts"] * s["concept"]
    return 2 * pairs * (s["embed"] * s["joint"] + s["joint"] * kc + kc)


def scoring_flops(name, s, phrases, regions, cascade=0):
    """Floating-point operations the model needs to score ``phrases`` encoded phrases against one
    image's ``regions`` region features (2 m n k per matrix product; the phrase side, done once per
    vocabulary, excluded). ``cascade`` k: CITE on the k best regions per phrase of the CCA shortlist."""
    if name == "matmul":
        return 2 * phrases * regions * s["region_dim"]
    if name == "QARCNNClassifier":  # <r, W v_p>: one dot product of D_r per pair
        return 2 * phrases * regions * s["region_dim"]
    if name == "CCAClassifier":  # region projection D_r -> k, then cosines
        return 2 * regions * s["region_dim"] * _cca_dim(s) + 2 * phrases * regions * _cca_dim(s)
    if name == "EmbeddingNetClassifier":  # region branch, then cosines
        return _branch_flops(s, regions) + 2 * phrases * regions * s["embed"]
    if name == "CITEClassifier":
        shortlist = scoring_flops("CCAClassifier", s, phrases, regions) if cascade else 0
        return shortlist + _branch_flops(s, regions) + cite_pair_flops(s, phrases * min(cascade or regions, regions))
    raise KeyError(f"no FLOP count for classifier {name!r}; expected one of {CLASSIFIERS}")


def _random_cca(d_r, d_t, k, seed=0):
    from phrasedet.modeling.cca import CCAProjection

    rng = np.random.default_rng(seed)
    return CCAProjection(np.zeros(d_r), np.zeros(d_t), rng.standard_normal((d_r, k)) / np.sqrt(d_r),
                         rng.standard_normal((d_t, k)) / np.sqrt(d_t), np.ones(k), np.ones(k))


def build(name, s):
    """The classifier ``name`` at sizes ``s``, in eval mode (CCA with a random projection)."""
    from phrasedet.modeling.classifiers import CCAClassifier, build_region_classifier

    cfg = _cfg(s)
    cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER = name
    clf = build_region_classifier(cfg, s["region_dim"], s["phrase_dim"])
    if isinstance(clf, CCAClassifier):
        clf.load_projection(_random_cca(s["region_dim"], s["phrase_dim"], min(s["region_dim"], s["phrase_dim"])))
    return clf.eval()


def _best_time(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


@torch.no_grad()
def measure(name, s, phrases, regions, batch, repeats, cascade=0):
    """(phrase-side seconds, per-image seconds) of one classifier."""
    torch.manual_seed(0)
    clf = build(name, s)
    r, t = torch.randn(regions, s["region_dim"]), torch.randn(phrases, s["phrase_dim"])
    codes = clf.encode_phrases(t)
    encode = _best_time(lambda: clf.encode_phrases(t), repeats)
    if cascade:
        short = build("CCAClassifier", s)
        short_codes = short.encode_phrases(t)

        def score():
            for i in range(0, phrases, batch):
                cand = short.score_encoded(r, short_codes[i:i + batch]).topk(min(cascade, regions), dim=1).indices
                clf.score_encoded(r, codes[i:i + batch], cand)
    else:
        def score():
            for i in range(0, phrases, batch):
                clf.score_encoded(r, codes[i:i + batch])
    return encode, _best_time(score, repeats)


def _worker(args):
    s = SIZES[args.sizes]
    extra = {}
    if args._worker == "matmul":
        w, r = torch.randn(args.phrases, s["region_dim"]), torch.randn(args.regions, s["region_dim"])
        out = (0.0, _best_time(lambda: w @ r.t(), max(args.repeats, 3)))
        extra["gemm_gflops"] = gemm_rate(s, args.batch * args.regions, max(args.repeats, 5))
    else:
        # the matrix-product rate again in this process, right before and after the scoring, so a
        # machine whose load changes between workers still gives each row a fair fraction
        before = gemm_rate(s, args.batch * args.regions, max(args.repeats, 5))
        out = measure(args._worker, s, args.phrases, args.regions, args.batch, args.repeats, args.cascade)
        extra["gemm_gflops"] = max(before, gemm_rate(s, args.batch * args.regions, max(args.repeats, 5)))
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps({"encode": out[0], "score": out[1], "peak_gb": peak_gb, **extra}))


def gemm_rate(s, rows, repeats):
    """The machine's matrix-product GFLOP/s: best of ``repeats`` [M, E] @ [E, J], M = min(rows, MAX_GEMM_ROWS)."""
    m = max(1, min(rows, MAX_GEMM_ROWS))
    a, b = torch.randn(m, s["embed"]), torch.randn(s["embed"], s["joint"])
    return 2 * m * s["embed"] * s["joint"] / _best_time(lambda: a @ b, repeats) / 1e9


def _run_worker(args, name, cascade=0):
    cmd = [sys.executable, __file__, "--_worker", name, "--sizes", args.sizes, "--phrases", str(args.phrases),
           "--regions", str(args.regions), "--batch", str(args.batch), "--repeats", str(args.repeats), "--cascade", str(cascade)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{name}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rows(args):
    """([(label, encode s, per-image s, peak GB, per-image FLOPs)], the matrix product first;
    the machine's matrix-product GFLOP/s measured in the same run)."""
    s = SIZES[args.sizes]
    base = _run_worker(args, "matmul")
    out = [("matrix product [P, D_r] @ [D_r, R]", base, scoring_flops("matmul", s, args.phrases, args.regions))]
    out += [(name, _run_worker(args, name), scoring_flops(name, s, args.phrases, args.regions)) for name in args.classifiers]
    out += [(f"CITEClassifier + cascade k={k}", _run_worker(args, "CITEClassifier", k),
             scoring_flops("CITEClassifier", s, args.phrases, args.regions, k)) for k in args.cascade_k]
    return [(label, m["encode"], m["score"], m["peak_gb"], flops, m["gemm_gflops"]) for label, m, flops in out], base["gemm_gflops"]


def format_table(args, table, gemm_gflops):
    """The table: times, the ratio to the first row's time, GFLOP per image, GFLOP/s and its
    fraction of the machine's matrix-product rate: the row's own (6th element, measured in the
    same process as its scoring) or else ``gemm_gflops``."""
    s = SIZES[args.sizes]
    base = table[0][2]
    m = max(1, min(args.batch * args.regions, MAX_GEMM_ROWS))
    lines = [f"{args.phrases} phrases x {args.regions} regions, D_r {s['region_dim']}, D_t {s['phrase_dim']} ({args.sizes} sizes), "
             f"phrase batches of {args.batch}, {torch.get_num_threads()} threads, best of {args.repeats}",
             f"matrix-product rate (best [{m}, {s['embed']}] @ [{s['embed']}, {s['joint']}] of the same run): {gemm_gflops:.1f} GFLOP/s "
             "(each row's fraction is of the rate measured again in its own process, before and after its scoring)",
             f"| {'scoring':40s} | phrase side, once (ms) | per image (ms) | x matrix product | GFLOP per image | GFLOP/s | of matrix-product rate | peak RSS (GB) |",
             f"|{'-' * 42}|-----------------------:|---------------:|-----------------:|----------------:|--------:|-----------------------:|--------------:|"]
    for label, encode, score, peak, flops, *own in table:
        rate = flops / score / 1e9
        lines.append(f"| {label:40s} | {encode * 1e3:22.1f} | {score * 1e3:14.1f} | {score / base:16.1f} | {flops / 1e9:15.1f} | "
                     f"{rate:7.1f} | {100 * rate / (own[0] if own else gemm_gflops):20.1f} % | {peak:13.2f} |")
    return "\n".join(lines)


def measure_filter(args, repeats: int, images: int = 20) -> dict:
    """Seconds per test image of phrase filtering (module docstring) for ``images`` test images at
    once, as the evaluator builds and applies one filter for a whole split; and of its matrix product."""
    from phrasedet.engine.phrase_filtering import top_n_indices
    from phrasedet.evaluation.phrase_detection.ground_truth import PhraseGroundTruth
    from phrasedet.evaluation.phrase_detection.phrase_filter import PhraseFilter

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(8000)]
    sentences = [" ".join(words[i] for i in row) for row in rng.integers(0, len(words), (args.filter_sentences, 12))]
    phrases = sorted({" ".join(words[i] for i in row) for row in rng.integers(0, len(words), (args.phrases, 2))})
    ids = [str(i) for i in range(images)]
    gt = PhraseGroundTruth(ids, phrases, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 4)))
    emb = torch.nn.functional.normalize(torch.randn(args.filter_sentences, args.filter_dim), dim=1)
    queries = torch.nn.functional.normalize(torch.randn(images, args.filter_dim), dim=1)
    kept = []

    def filter_split():
        top = np.concatenate([top_n_indices((q[None] @ emb.t()).numpy(), args.filter_top_n) for q in queries])
        f = PhraseFilter.from_retrieved(ids, top, sentences, args.filter_top_n)
        kept[:] = [mask.mean() for _, mask in f.keep_masks(gt)]

    return {"filter": _best_time(filter_split, repeats) / images,
            "matmul": _best_time(lambda: queries[:1] @ emb.t(), max(repeats, 3)), "kept": float(np.mean(kept))}


def format_filter(args, result: dict, cite_seconds: float) -> str:
    f, m = result["filter"], result["matmul"]
    return (f"Phrase filtering per test image: {args.filter_sentences} sentences, {args.filter_dim}-d, top {args.filter_top_n}, "
            f"{args.phrases} phrases: {f * 1e3:.1f} ms ({f / m:.1f}x the product [1, d] @ [d, M], {m * 1e3:.2f} ms); "
            f"CITE's full-vocabulary scoring per image above: {cite_seconds * 1e3:.0f} ms, so the filter costs "
            f"{100 * f / cite_seconds:.2f} % of it ({100 * result['kept']:.1f} % of the random vocabulary kept)")


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", choices=sorted(SIZES), default="paper")
    p.add_argument("--phrases", type=int, default=5000)
    p.add_argument("--regions", type=int, default=300)
    p.add_argument("--batch", type=int, default=650, help="phrases scored at once (the CITE code: 650)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--classifiers", nargs="+", default=CLASSIFIERS, choices=CLASSIFIERS, help="the classifiers to time")
    p.add_argument("--cascade-k", type=int, nargs="*", default=[10, 30], help="cascade shortlist sizes to time")
    p.add_argument("--filter-sentences", type=int, default=148915, help="sentences of the phrase filter's database (0: no filter row)")
    p.add_argument("--filter-dim", type=int, default=512, help="the retrieval embedding size")
    p.add_argument("--filter-top-n", type=int, default=100, help="sentences retrieved per test image")
    p.add_argument("--cascade", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args._worker:
        _worker(args)
        return None
    table, gemm_gflops = rows(args)
    text = format_table(args, table, gemm_gflops)
    if args.filter_sentences and "CITEClassifier" in args.classifiers:
        cite = next(score for label, _, score, _, _ in table if label == "CITEClassifier")
        text += "\n\n" + format_filter(args, measure_filter(args, args.repeats), cite)
    print(text)
    return text


if __name__ == "__main__":
    main()
