"""Which phrases of a training image enter the minibatch: uniform or inverse-frequency sampling (IFS).

Paper 003 Sec. 4.3: with f_i the training share of phrase i among the image's candidates,
p_i = 1 - f_i / sum(f). That sums to 1 only for two candidates (the released code asserts), so
the weights are renormalized here; ``"inverse"`` (p_i proportional to 1 / f_i) is the other
generalization the digest suggests. Ground-truth phrases come first: while they fit in the
budget all are kept and augmented (PPA) phrases fill the rest, as in the paper; when there are
more ground-truth phrases than the budget they themselves are drawn with the same weights.
"""
import numpy as np

__all__ = ["SAMPLING_MODES", "IFS_WEIGHTINGS", "sampling_weights", "choose_phrases"]

SAMPLING_MODES = ("uniform", "ifs")
IFS_WEIGHTINGS = ("one_minus_share", "inverse")


def sampling_weights(counts, mode="uniform", weighting="one_minus_share"):
    """Sampling probabilities of candidate phrases.

    Args:
        counts: training counts of the candidates, shape (N,). A count below 1 is treated as 1.
        mode: ``"uniform"`` or ``"ifs"``.
        weighting: IFS weighting, ``"one_minus_share"`` or ``"inverse"``.

    Returns:
        float64 array (N,) summing to 1. E.g. IFS of counts (15, 5): (0.25, 0.75) (the paper's
        dog/terrier example).
    """
    if mode not in SAMPLING_MODES:
        raise ValueError(f"INPUT.PHRASES.SAMPLING must be one of {SAMPLING_MODES}, got {mode!r}")
    if weighting not in IFS_WEIGHTINGS:
        raise ValueError(f"INPUT.PHRASES.IFS_WEIGHTING must be one of {IFS_WEIGHTINGS}, got {weighting!r}")
    counts = np.maximum(np.asarray(counts, dtype=np.float64), 1.0)
    n = len(counts)
    if mode == "uniform" or n == 1:
        return np.full(n, 1.0 / n)
    w = 1.0 - counts / counts.sum() if weighting == "one_minus_share" else 1.0 / counts
    return w / w.sum()


def _draw(items, k, weights, rng):
    if k >= len(items):
        return list(items)
    idx = rng.choice(len(items), size=k, replace=False, p=weights)
    return [items[i] for i in sorted(idx)]


def choose_phrases(gt_phrases, augmented, max_phrases, count_of, rng, mode="uniform", weighting="one_minus_share"):
    """Pick at most ``max_phrases`` phrases of an image.

    Args:
        gt_phrases: the image's distinct ground-truth phrases.
        augmented: distinct augmented phrases not among ``gt_phrases``.
        count_of: callable phrase -> training count.
        rng: a ``numpy.random.Generator`` or ``numpy.random`` module (``choice`` is used).

    Returns:
        (chosen ground-truth phrases, chosen augmented phrases), each in input order.
    """
    def weights(items):
        return sampling_weights([count_of(p) for p in items], mode, weighting)

    if len(gt_phrases) >= max_phrases:
        return _draw(gt_phrases, max_phrases, weights(gt_phrases), rng), []
    budget = max_phrases - len(gt_phrases)
    return list(gt_phrases), _draw(augmented, budget, weights(augmented) if augmented else None, rng)
