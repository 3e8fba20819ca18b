#!/usr/bin/env python
"""Cost of open-vocabulary scoring per region classifier: a whole vocabulary (default 5,000
phrases) against the regions of one image (default 300), next to one matrix product of the same
sizes ([P, D_r] @ [D_r, R]) measured in the same run.

    python tools/benchmark_scoring.py                 # paper 003's sizes: D_r 2053, D_t 6000, code widths
    python tools/benchmark_scoring.py --sizes builtin # the built-in configs' sizes
    python tools/benchmark_scoring.py --phrases 500 --regions 50 --repeats 1   # quick
    python tools/benchmark_scoring.py --classifiers CITEClassifier --cascade-k  # CITE and the phrase filter only

For each classifier it reports the phrase-side work done once per vocabulary (``encode_phrases``)
and the per-image work (``score_encoded`` over the vocabulary in batches of ``--batch`` phrases,
as ``PhraseROIHeads`` does), the ratio of the per-image time to the matrix product, and the peak
resident memory of a fresh process that did only that classifier. ``CITE + cascade k`` is CITE
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
(``tools/benchmark_retrieval.py --sections encoding``).
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
    "paper": dict(region_dim=2053, phrase_dim=6000, hidden=2053, embed=1024, joint=1024, concept=256),
    # configs/Base-Recipe.yaml: 256-d fc feature + 5, 100-d word2vec
    "builtin": dict(region_dim=261, phrase_dim=100, hidden=100, embed=100, joint=256, concept=64),
}
CLASSIFIERS = ["QARCNNClassifier", "CCAClassifier", "EmbeddingNetClassifier", "CITEClassifier"]


def _cfg(s):
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    h = cfg.MODEL.PHRASE_ROI_HEADS
    h.EMBEDDING_NET.HIDDEN_DIM, h.EMBEDDING_NET.EMBED_DIM = s["hidden"], s["embed"]
    h.CITE.HIDDEN_DIM, h.CITE.EMBED_DIM, h.CITE.JOINT_DIM, h.CITE.CONCEPT_DIM = s["hidden"], s["embed"], s["joint"], s["concept"]
    return cfg


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
    if args._worker == "matmul":
        w, r = torch.randn(args.phrases, s["region_dim"]), torch.randn(args.regions, s["region_dim"])
        out = (0.0, _best_time(lambda: w @ r.t(), max(args.repeats, 3)))
    else:
        out = measure(args._worker, s, args.phrases, args.regions, args.batch, args.repeats, args.cascade)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps({"encode": out[0], "score": out[1], "peak_gb": peak_gb}))


def _run_worker(args, name, cascade=0):
    cmd = [sys.executable, __file__, "--_worker", name, "--sizes", args.sizes, "--phrases", str(args.phrases),
           "--regions", str(args.regions), "--batch", str(args.batch), "--repeats", str(args.repeats), "--cascade", str(cascade)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{name}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rows(args):
    """[(label, encode s, per-image s, peak GB)], the matrix product first."""
    out = [("matrix product [P, D_r] @ [D_r, R]", _run_worker(args, "matmul"))]
    out += [(name, _run_worker(args, name)) for name in args.classifiers]
    out += [(f"CITEClassifier + cascade k={k}", _run_worker(args, "CITEClassifier", k)) for k in args.cascade_k]
    return [(label, m["encode"], m["score"], m["peak_gb"]) for label, m in out]


def format_table(args, table):
    s = SIZES[args.sizes]
    base = table[0][2]
    lines = [f"{args.phrases} phrases x {args.regions} regions, D_r {s['region_dim']}, D_t {s['phrase_dim']} ({args.sizes} sizes), "
             f"phrase batches of {args.batch}, {torch.get_num_threads()} threads, best of {args.repeats}",
             f"| {'scoring':40s} | phrase side, once (ms) | per image (ms) | x matrix product | peak RSS (GB) |",
             f"|{'-' * 42}|-----------------------:|---------------:|-----------------:|--------------:|"]
    for label, encode, score, peak in table:
        lines.append(f"| {label:40s} | {encode * 1e3:22.1f} | {score * 1e3:14.1f} | {score / base:16.1f} | {peak:13.2f} |")
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
    table = rows(args)
    text = format_table(args, table)
    if args.filter_sentences and "CITEClassifier" in args.classifiers:
        cite = next(score for label, _, score, _ in table if label == "CITEClassifier")
        text += "\n\n" + format_filter(args, measure_filter(args, args.repeats), cite)
    print(text)
    return text


if __name__ == "__main__":
    main()
