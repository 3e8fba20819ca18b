"""Closed-form linear CCA from streamed, phrase-grouped covariances (paper 003 Sec. 3.3.2, 4.1).

Positive (region, phrase) pairs are collected over the whole training set. Many pairs share one
phrase, so the phrase side is accumulated per phrase: for pairs (x_i, y_{p(i)}),

    sum_i x_i y_{p(i)}^T = sum_p (sum_{i: p(i)=p} x_i) y_p^T,   sum_i y y^T = sum_p c_p y_p y_p^T,

which needs the region sums and counts per phrase, not one phrase row per pair. Region
moments are accumulated batch by batch, all in float64, so memory does not grow with the number
of pairs. The fit follows the released code (``lib/model/cca.py``): ridge ``r`` on both
covariances, T = S11^-1/2 S12 S22^-1/2 = U D V^T, A = S11^-1/2 U_k, B = S22^-1/2 V_k, and the
normalized-CCA scaling D_k^power (power 1 in the code; Gong et al. use eigenvalues^4).
"""
from dataclasses import dataclass

import numpy as np

__all__ = ["PhraseGroupedMoments", "CCAProjection", "fit_cca"]


class PhraseGroupedMoments:
    """Streaming first and second moments of (region, phrase) pairs, grouped by phrase.

    Args:
        region_dim: D_x.
        num_phrases: V, the size of the phrase table that ``phrase_ids`` index.
    """

    def __init__(self, region_dim: int, num_phrases: int):
        self.n = 0
        self.sum_x = np.zeros(region_dim)
        self.sum_xx = np.zeros((region_dim, region_dim))
        self.region_sum_per_phrase = np.zeros((num_phrases, region_dim))
        self.count_per_phrase = np.zeros(num_phrases)

    def add(self, regions, phrase_ids) -> None:
        """Add pairs: ``regions`` [N, D_x], ``phrase_ids`` [N] (row of each pair's phrase)."""
        x = np.asarray(regions, dtype=np.float64)
        ids = np.asarray(phrase_ids, dtype=np.int64)
        if x.ndim != 2 or x.shape[0] != ids.shape[0] or x.shape[1] != self.sum_x.shape[0]:
            raise ValueError(f"regions {x.shape} and phrase_ids {ids.shape} do not match D_x = {self.sum_x.shape[0]}")
        self.n += len(x)
        self.sum_x += x.sum(0)
        self.sum_xx += x.T @ x
        np.add.at(self.region_sum_per_phrase, ids, x)
        self.count_per_phrase += np.bincount(ids, minlength=len(self.count_per_phrase))

    def covariances(self, phrase_table):
        """Means and covariances of the pairs, given the phrase features ``phrase_table`` [V, D_y].

        Returns:
            (mean_x [D_x], mean_y [D_y], S11 [D_x, D_x], S22 [D_y, D_y], S12 [D_x, D_y]), float64,
            normalized by n - 1 as the released code.
        """
        if self.n < 2:
            raise ValueError(f"CCA needs at least 2 pairs, got {self.n}")
        y = np.asarray(phrase_table, dtype=np.float64)
        used = np.flatnonzero(self.count_per_phrase)
        c, yu = self.count_per_phrase[used], y[used]
        n = float(self.n)
        mean_x = self.sum_x / n
        mean_y = c @ yu / n
        s11 = (self.sum_xx - n * np.outer(mean_x, mean_x)) / (n - 1)
        s22 = ((yu * c[:, None]).T @ yu - n * np.outer(mean_y, mean_y)) / (n - 1)
        s12 = (self.region_sum_per_phrase[used].T @ yu - n * np.outer(mean_x, mean_y)) / (n - 1)
        return mean_x, mean_y, s11, s22, s12


def _inv_sqrt(s: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh(s)
    return (v / np.sqrt(np.maximum(w, 1e-12))) @ v.T


@dataclass
class CCAProjection:
    """A fitted CCA: project with ``((x - mean_x) @ A) * scale`` and ``((y - mean_y) @ B) * scale``.

    Attributes:
        mean_x [D_x], mean_y [D_y], A [D_x, k], B [D_y, k], correlations [k] (canonical
        correlations D_k), scale [k] (D_k ** power).
    """

    mean_x: np.ndarray
    mean_y: np.ndarray
    A: np.ndarray
    B: np.ndarray
    correlations: np.ndarray
    scale: np.ndarray

    def project_regions(self, x):
        """[N, D_x] -> [N, k]."""
        return ((np.asarray(x, dtype=np.float64) - self.mean_x) @ self.A) * self.scale

    def project_phrases(self, y):
        """[N, D_y] -> [N, k]."""
        return ((np.asarray(y, dtype=np.float64) - self.mean_y) @ self.B) * self.scale


def fit_cca(moments: PhraseGroupedMoments, phrase_table, dim: int = None, ridge: float = 1e-4, power: float = 1.0) -> CCAProjection:
    """Closed-form CCA of the accumulated pairs.

    Args:
        dim: k, number of canonical directions (default min(D_x, D_y)).
        ridge: added to the diagonals of both covariances (released code: 1e-4).
        power: the projections are scaled by correlations ** power (normalized CCA).
    """
    mean_x, mean_y, s11, s22, s12 = moments.covariances(phrase_table)
    s11 = s11 + ridge * np.eye(len(s11))
    s22 = s22 + ridge * np.eye(len(s22))
    r11, r22 = _inv_sqrt(s11), _inv_sqrt(s22)
    u, d, vt = np.linalg.svd(r11 @ s12 @ r22, full_matrices=False)
    k = min(len(d), dim or len(d))
    return CCAProjection(mean_x, mean_y, r11 @ u[:, :k], r22 @ vt[:k].T, d[:k], d[:k] ** power)
