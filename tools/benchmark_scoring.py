#!/usr/bin/env python
"""Cost of open-vocabulary scoring per region classifier: a whole vocabulary (default 5,000
phrases) against the regions of one image (default 300), next to one matrix product of the same
sizes ([P, D_r] @ [D_r, R]) measured in the same run.

    python tools/benchmark_scoring.py                 # paper 003's sizes: D_r 2053, D_t 6000, code widths
    python tools/benchmark_scoring.py --sizes builtin # the built-in configs' sizes
    python tools/benchmark_scoring.py --phrases 500 --regions 50 --repeats 1   # quick

For each classifier it reports the phrase-side work done once per vocabulary (``encode_phrases``)
and the per-image work (``score_encoded`` over the vocabulary in batches of ``--batch`` phrases,
as ``PhraseROIHeads`` does), the ratio of the per-image time to the matrix product, and the peak
resident memory of a fresh process that did only that classifier. ``CITE + cascade k`` is CITE
scoring only the k best regions per phrase by the CCA cosine (``MODEL.PHRASE_ROI_HEADS.CASCADE_TOPK``).
Weights are random: the cost does not depend on their values.
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
    out += [(name, _run_worker(args, name)) for name in CLASSIFIERS]
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


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", choices=sorted(SIZES), default="paper")
    p.add_argument("--phrases", type=int, default=5000)
    p.add_argument("--regions", type=int, default=300)
    p.add_argument("--batch", type=int, default=650, help="phrases scored at once (the CITE code: 650)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--cascade-k", type=int, nargs="*", default=[10, 30], help="cascade shortlist sizes to time")
    p.add_argument("--cascade", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args._worker:
        _worker(args)
        return None
    text = format_table(args, rows(args))
    print(text)
    return text


if __name__ == "__main__":
    main()
