#!/usr/bin/env python
"""Time and peak memory of the closed-form CCA fit (``phrasedet/modeling/cca/linear.py``) at paper 003's
scale, and its speed against scikit-learn's iterative CCA.

    python tools/benchmarks/benchmark_cca.py [--pairs 420000] [--region-dim 2053] [--phrase-dim 6000]
        [--phrases 40000] [--dim N] [--batch 8192] [--threads N] [--sk-pairs 10000] [--sk-region-dim 400] ...

Paper scale (paper 003 Sec. 4.1): 420,000 positive (region, phrase) pairs, 2,053-d region features
(D_x) and 6,000-d phrase features (D_y). The number of distinct phrases is not in the paper:
Flickr30K Entities' training vocabulary holds tens of thousands of phrases, so the default is
40,000 (about 10 pairs per phrase on average). Its cost grows with it: the per-phrase region sums
are [V, D_x] float64 (0.66 GB at 40,000) and the phrase-side products are O(V D_y^2). Phrase
frequencies follow Zipf's law (a few phrases, "a man", take thousands of pairs; most occur
once or twice); every phrase has at least one pair, as in a training vocabulary.

Data (planted, so the fit is meaningful): each phrase has a latent vector h_p of
``len(PLANTED)`` standard-normal components. The phrase table (float32, as the phrase encoders
give it) is y_p = (a * h_p) Q_y + noise, a region of a pair of phrase p is
x = (a * h_p) Q_x + noise, with Q_x, Q_y orthonormal axes, unit-variance Gaussian noise and
a_j = sqrt(rho_j / (1 - rho_j)), so that the canonical correlations of the pairs are
about ``PLANTED`` rho_j (the rest being sampling noise). Region features are generated batch by
batch and streamed into :class:`PhraseGroupedMoments`, as ``tools/phrase_detection/fit_cca.py`` does.

Reported:

- ``accumulate``: the ``PhraseGroupedMoments.add`` calls (generating the regions is timed
  apart and not counted); ``fit``: ``fit_cca`` (covariances, whitening, SVD) with ridge 1e-4
  (the released code's);
- ``peak RSS``: the worker process' high-water resident memory (``VmHWM``; each measurement
  runs in a fresh subprocess). ``getrusage(...).ru_maxrss`` is not used: on Linux a child
  inherits its parent's high-water mark across ``exec``, so it would count a large parent (pytest);
  ``imports`` = the worker's resident memory before any data was allocated;
- ``vs scikit-learn``: ``sklearn.cross_decomposition.CCA`` (NIPALS, ``scale=False``) and
  ``fit_cca`` (ridge 0, accumulation included; best of 3 runs, as it takes milliseconds) on
  a smaller planted sample, fitted in the same worker; the ratio is sklearn's time over ours,
  and the canonical correlations of the first components must agree (sklearn's are the
  correlations of its paired scores).

``--threads N`` sets the BLAS threads of the workers (``OPENBLAS_NUM_THREADS`` etc.; default: the
library's, one per core). On a machine that other jobs share, OpenBLAS' LAPACK calls (SVD, QR,
eigh) slow down many times over when its threads outnumber the idle cores (an SVD of
2,053 x 6,000 measured 9 s with 1 thread, 115 s with 2 threads next to a training job): there,
``--threads 1`` gives the steadier figure. The header says which threads ran and the load average at the end.

Workers load ``cca/linear.py`` by its path, not through ``import phrasedet``, which would pull in torch
and Detectron2 (7 s and some hundred MB that ``tools/phrase_detection/fit_cca.py`` pays anyway, but that are no
part of the CCA); ``cca/linear.py`` needs only numpy and scipy. Not a test.
"""
import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

PLANTED = (0.9, 0.8, 0.7, 0.6, 0.5)
CCA_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "phrasedet", "modeling", "cca", "linear.py")
TARGET_SECONDS, TARGET_GB = 600, 6.0


def load_cca():
    """The ``phrasedet.modeling.cca.linear`` module, loaded from its file alone (no torch)."""
    spec = importlib.util.spec_from_file_location("_benchmarked_cca", CCA_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def blas_threads() -> int:
    """Threads of the BLAS numpy uses (0 when unknown)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return 0
    return max((pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"), default=0)


def rss_gb(field: str = "VmHWM") -> float:
    """This process' resident memory in GB: high-water mark (``VmHWM``) or current (``VmRSS``)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # Linux: KiB


class PlantedPairs:
    """Synthetic (region, phrase) pairs whose canonical correlations are about ``PLANTED``.

    Args:
        num_pairs, region_dim, phrase_dim, num_phrases: the sizes (num_phrases <= num_pairs).
        chunk: rows generated at once (bounds the float32 temporaries).
    """

    def __init__(self, num_pairs, region_dim, phrase_dim, num_phrases, seed=0, chunk=4096):
        k = len(PLANTED)
        if not k <= min(region_dim, phrase_dim) or not 0 < num_phrases <= num_pairs:
            raise ValueError(f"need {k} <= both dims and 0 < phrases ({num_phrases}) <= pairs ({num_pairs})")
        self.rng = np.random.default_rng(seed)
        self.chunk = chunk
        strength = np.sqrt(np.array(PLANTED) / (1 - np.array(PLANTED)))
        self.signal = (self.rng.standard_normal((num_phrases, k)) * strength).astype(np.float32)  # a * h_p
        self.region_axes, phrase_axes = (self._orthonormal_rows(k, d) for d in (region_dim, phrase_dim))
        self.table = self._noisy(self.signal, phrase_axes)
        self.phrase_ids = self._zipf_ids(num_pairs, num_phrases)

    def _orthonormal_rows(self, k, dim):
        return np.linalg.qr(self.rng.standard_normal((dim, k)))[0].T.astype(np.float32)

    def _noisy(self, signal, axes):
        """signal @ axes + unit Gaussian noise, float32, ``chunk`` rows at a time."""
        out = self.rng.standard_normal((len(signal), axes.shape[1]), dtype=np.float32)
        for i in range(0, len(out), self.chunk):
            out[i:i + self.chunk] += signal[i:i + self.chunk] @ axes
        return out

    def _zipf_ids(self, num_pairs, num_phrases):
        p = 1.0 / np.arange(1, num_phrases + 1)
        extra = self.rng.choice(num_phrases, num_pairs - num_phrases, p=p / p.sum())
        return self.rng.permutation(np.concatenate([np.arange(num_phrases), extra]))

    def regions(self, ids):
        """Region features [len(ids), D_x] float32 of pairs with these phrases (fresh noise per call)."""
        return self._noisy(self.signal[ids], self.region_axes)

    def batches(self, size):
        """Yield ``(regions, phrase_ids)`` of all pairs, ``size`` at a time."""
        for i in range(0, len(self.phrase_ids), size):
            ids = self.phrase_ids[i:i + size]
            yield self.regions(ids), ids


def timed(fn):
    """(result of fn(), seconds)."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def run_paper_scale(args) -> dict:
    """Stream the pairs into the moments and fit; times, memory and correlations."""
    cca = load_cca()
    imports_gb = rss_gb("VmRSS")
    data = PlantedPairs(args.pairs, args.region_dim, args.phrase_dim, args.phrases, args.seed)
    moments = cca.PhraseGroupedMoments(args.region_dim, args.phrases)
    generate_s = accumulate_s = 0.0
    batches = data.batches(args.batch)
    while True:
        batch, seconds = timed(lambda: next(batches, None))
        generate_s += seconds
        if batch is None:
            break
        accumulate_s += timed(lambda batch=batch: moments.add(*batch))[1]
    projection, fit_s = timed(lambda: cca.fit_cca(moments, data.table, args.dim, ridge=1e-4))
    return {"generate_s": generate_s, "accumulate_s": accumulate_s, "fit_s": fit_s, "peak_gb": rss_gb(), "threads": blas_threads(),
            "imports_gb": imports_gb, "table_gb": data.table.nbytes / 1e9, "k": len(projection.correlations),
            "correlations": projection.correlations[:len(PLANTED) + 3].tolist()}


def best_time(fn, repeats):
    """(result of the last run, fastest of ``repeats`` runs in seconds)."""
    runs = [timed(fn) for _ in range(repeats)]
    return runs[-1][0], min(seconds for _, seconds in runs)


def run_sklearn_comparison(args) -> dict:
    """Fit ours and scikit-learn's CCA on the same small planted sample."""
    from sklearn.cross_decomposition import CCA

    cca = load_cca()
    k = args.sk_components
    data = PlantedPairs(args.sk_pairs, args.sk_region_dim, args.sk_phrase_dim, args.sk_phrases, args.seed + 1)
    x, ids = data.regions(data.phrase_ids).astype(np.float64), data.phrase_ids
    y = data.table[ids].astype(np.float64)

    def ours():
        moments = cca.PhraseGroupedMoments(x.shape[1], len(data.table))
        moments.add(x, ids)
        return cca.fit_cca(moments, data.table, k, ridge=0.0)

    projection, ours_s = best_time(ours, 3)
    reference, sklearn_s = best_time(lambda: CCA(n_components=k, scale=False, max_iter=5000, tol=1e-10).fit(x, y), 1)
    xs, ys = reference.transform(x, y)
    sk_corr = [abs(np.corrcoef(xs[:, i], ys[:, i])[0, 1]) for i in range(k)]
    return {"ours_s": ours_s, "sklearn_s": sklearn_s, "ours_corr": projection.correlations.tolist(), "sklearn_corr": sk_corr,
            "max_abs_diff": float(np.max(np.abs(projection.correlations - sk_corr)))}


WORKERS = {"paper": run_paper_scale, "sklearn": run_sklearn_comparison}


THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def run_worker(kind, argv, threads=None) -> dict:
    """Run measurement ``kind`` in a fresh Python process (``threads`` BLAS threads); its JSON result."""
    env = dict(os.environ, **dict.fromkeys(THREAD_VARIABLES, str(threads))) if threads else None
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--_worker", kind, *argv], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"{kind} worker failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _numbers(values, fmt="{:.3f}"):
    return " ".join(fmt.format(v) for v in values)


def format_report(args, paper, sk) -> str:
    """The printed table."""
    total = paper["accumulate_s"] + paper["fit_s"]
    corr = paper["correlations"]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = f", 1-min load average at the end {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    rows = [
        f"CCA benchmark: {cores} CPU cores, {paper['threads'] or '?'} BLAS threads{load}",
        (f"paper scale: {args.pairs:,d} pairs, {args.phrases:,d} phrases, D_x {args.region_dim:,d}, D_y {args.phrase_dim:,d}, "
         f"k {paper['k']:,d}"),
        f"  {'generate regions (not counted)':36s} {paper['generate_s']:8.1f} s",
        f"  {'accumulate moments':36s} {paper['accumulate_s']:8.1f} s",
        f"  {'fit (covariances + decompositions)':36s} {paper['fit_s']:8.1f} s",
        f"  {'accumulate + fit':36s} {total:8.1f} s   target < {TARGET_SECONDS} s: {'yes' if total < TARGET_SECONDS else 'NO'}",
        (f"  {'peak RSS':36s} {paper['peak_gb']:8.2f} GB  target < {TARGET_GB:g} GB: {'yes' if paper['peak_gb'] < TARGET_GB else 'NO'} "
         f"(imports {paper['imports_gb']:.2f} GB, float32 phrase table {paper['table_gb']:.2f} GB)"),
        f"  {'top canonical correlations':36s} {_numbers(corr[:len(PLANTED)])} | {_numbers(corr[len(PLANTED):])}",
        f"  {'planted':36s} {_numbers(PLANTED)}",
        (f"vs scikit-learn CCA: {args.sk_pairs:,d} pairs, {args.sk_phrases:,d} phrases, D_x {args.sk_region_dim}, "
         f"D_y {args.sk_phrase_dim}, {args.sk_components} components"),
        f"  {'fit_cca (best of 3)':36s} {sk['ours_s']:8.3f} s",
        f"  {'sklearn CCA':36s} {sk['sklearn_s']:8.3f} s",
        f"  {'ratio sklearn / ours':36s} {sk['sklearn_s'] / sk['ours_s']:8.1f} x",
        f"  {'correlations ours':36s} {_numbers(sk['ours_corr'], '{:.6f}')}",
        f"  {'correlations sklearn':36s} {_numbers(sk['sklearn_corr'], '{:.6f}')}",
        f"  {'max |difference|':36s} {sk['max_abs_diff']:.1e}",
    ]
    return "\n".join(rows)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=420_000)
    p.add_argument("--region-dim", type=int, default=2053, help="D_x")
    p.add_argument("--phrase-dim", type=int, default=6000, help="D_y")
    p.add_argument("--phrases", type=int, default=40_000, help="distinct phrases V (<= pairs)")
    p.add_argument("--dim", type=int, default=None, help="canonical directions kept (default min(D_x, D_y))")
    p.add_argument("--batch", type=int, default=8192, help="region features streamed per batch")
    p.add_argument("--threads", type=int, default=None, help="BLAS threads of the workers (default: the library's)")
    p.add_argument("--sk-pairs", type=int, default=10_000)
    p.add_argument("--sk-region-dim", type=int, default=400)
    p.add_argument("--sk-phrase-dim", type=int, default=400)
    p.add_argument("--sk-phrases", type=int, default=4000)
    p.add_argument("--sk-components", type=int, default=4, help=f"<= {len(PLANTED)}: compared components")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--_worker", choices=WORKERS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not 1 <= args.sk_components <= len(PLANTED):
        p.error(f"--sk-components must be in 1..{len(PLANTED)} (the planted correlations; sklearn's later components "
                "converge poorly between noise correlations)")
    for pairs, phrases, dims in ((args.pairs, args.phrases, (args.region_dim, args.phrase_dim)),
                                 (args.sk_pairs, args.sk_phrases, (args.sk_region_dim, args.sk_phrase_dim))):
        if not 0 < phrases <= pairs or min(dims) < len(PLANTED):
            p.error(f"need 0 < phrases ({phrases}) <= pairs ({pairs}) and dims {dims} >= {len(PLANTED)}")
    return args


def main(argv=None) -> dict:
    """Run both measurements in fresh subprocesses and print the table; returns their results."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args._worker:
        print(json.dumps(WORKERS[args._worker](args)))
        return {}
    results = {kind: run_worker(kind, argv, args.threads) for kind in WORKERS}
    print(format_report(args, results["paper"], results["sklearn"]))
    return results


if __name__ == "__main__":
    main()
