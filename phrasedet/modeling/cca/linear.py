"""Closed-form linear CCA from streamed, phrase-grouped covariances (paper 003 Sec. 3.3.2, 4.1).

Positive (region, phrase) pairs are collected over the whole training set. Many pairs share one
phrase, so the phrase side is accumulated per phrase: for pairs (x_i, y_{p(i)}),

    sum_i x_i y_{p(i)}^T = sum_p (sum_{i: p(i)=p} x_i) y_p^T,   sum_i y y^T = sum_p c_p y_p y_p^T,

which needs the region sums and counts per phrase, not one phrase row per pair. Region
moments are accumulated batch by batch, all in float64, so memory does not grow with the number
of pairs; the phrase-side products run over chunks of phrase-table rows, upcast to float64 chunk
by chunk, so a float32 table is never copied whole. The fit follows the released code
(``lib/model/cca.py``): ridge ``r`` on both covariances, T = W1 S12 W2^T = U D V^T, A = W1^T U_k,
B = W2^T V_k, and the normalized-CCA scaling D_k^power (power 1 in the code; Gong et al. use
eigenvalues^4). W is a whitening (W S W^T = I): the code's S^-1/2; here the inverse Cholesky factor
L^-1 (S = L L^T) when S is positive definite, which gives the same D, A and B (up to the signs of
the singular vectors: S^-1/2 = Q L^-1 with Q orthogonal, and Q cancels out of A and B) for a
fraction of the cost of an eigendecomposition of the 6,000 x 6,000 S22; else S^-1/2 as the code.
"""
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse

__all__ = ["CCAProjection", "PhraseGroupedMoments", "fit_cca", "fit_cca_paired"]


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
        phrases, pair_phrase = np.unique(ids, return_inverse=True)
        one_hot = scipy.sparse.csr_array((np.ones(len(ids)), (pair_phrase, np.arange(len(ids)))), shape=(len(phrases), len(ids)))
        self.region_sum_per_phrase[phrases] += one_hot @ x  # = np.add.at(sums, ids, x), ~4x faster
        self.count_per_phrase += np.bincount(ids, minlength=len(self.count_per_phrase))

    def covariances(self, phrase_table, chunk_rows: int = 2048):
        """Means and covariances of the pairs, given the phrase features ``phrase_table`` [V, D_y].

        Args:
            phrase_table: any float dtype (float32 is not copied to float64 whole).
            chunk_rows: phrase-table rows upcast and multiplied at a time (memory vs. BLAS speed).

        Returns:
            (mean_x [D_x], mean_y [D_y], S11 [D_x, D_x], S22 [D_y, D_y], S12 [D_x, D_y]), float64,
            normalized by n - 1 as the released code.
        """
        if self.n < 2:
            raise ValueError(f"CCA needs at least 2 pairs, got {self.n}")
        y = np.asarray(phrase_table)
        used = np.flatnonzero(self.count_per_phrase)
        n = float(self.n)
        sum_y, syy, sxy = np.zeros(y.shape[1]), np.zeros((y.shape[1], y.shape[1])), np.zeros((len(self.sum_x), y.shape[1]))
        for start in range(0, len(used), chunk_rows):
            rows = used[start:start + chunk_rows]
            c, yc = self.count_per_phrase[rows], y[rows].astype(np.float64, copy=False)
            sum_y += c @ yc
            sxy += self.region_sum_per_phrase[rows].T @ yc
            yc *= np.sqrt(c)[:, None]
            syy += yc.T @ yc  # sum_p c_p y_p y_p^T (one BLAS syrk)
        mean_x, mean_y = self.sum_x / n, sum_y / n
        return (mean_x, mean_y, _centered(self.sum_xx.copy(), mean_x, mean_x, n), _centered(syy, mean_y, mean_y, n),
                _centered(sxy, mean_x, mean_y, n))


def _centered(second_moment, mean_a, mean_b, n):
    """(sum a b^T - n mean_a mean_b^T) / (n - 1), overwriting ``second_moment``."""
    outer = np.outer(mean_a, mean_b)
    outer *= n
    second_moment -= outer
    second_moment /= n - 1
    return second_moment


def _inv_sqrt(s: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh(s)
    return (v / np.sqrt(np.maximum(w, 1e-12))) @ v.T


def _cholesky(s: np.ndarray):
    """Lower Cholesky factor L of ``s`` (s = L L^T), or None when ``s`` is not positive definite."""
    try:
        return scipy.linalg.cholesky(s, lower=True)
    except np.linalg.LinAlgError:
        return None


class _Whitening:
    """A matrix W with W S W^T = I for a covariance S: L^-1 (Cholesky, S = L L^T) when S is
    positive definite, else the released code's S^-1/2 (eigenvalues clamped at 1e-12)."""

    def __init__(self, s: np.ndarray):
        self.lower = _cholesky(s)
        self.inv_sqrt = _inv_sqrt(s) if self.lower is None else None

    def left(self, m: np.ndarray) -> np.ndarray:
        """W m."""
        return self.inv_sqrt @ m if self.lower is None else scipy.linalg.solve_triangular(self.lower, m, lower=True)

    def right(self, m: np.ndarray) -> np.ndarray:
        """m W^T."""
        return m @ self.inv_sqrt if self.lower is None else self.left(m.T).T

    def transposed_left(self, m: np.ndarray) -> np.ndarray:
        """W^T m."""
        if self.lower is None:
            return self.inv_sqrt @ m
        return scipy.linalg.solve_triangular(self.lower, m, lower=True, trans="T")


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


def _check_finite(covariance: np.ndarray, name: str) -> None:
    """ValueError when ``covariance`` holds NaN or inf (from non-finite features, or sums that
    overflow float64); the decompositions would otherwise fail or give NaN layers. S11 and S22
    suffice: a NaN or inf feature reaches their diagonals, and |S12_ij| <= sqrt(S11_ii S22_jj)."""
    if not np.isfinite(covariance).all():
        raise ValueError(f"CCA: the {name} covariance holds values that are not finite "
                         f"(NaN or inf {name} features, or sums too large for float64)")


def fit_cca(moments: PhraseGroupedMoments, phrase_table, dim: int | None = None, ridge: float = 1e-4, power: float = 1.0) -> CCAProjection:
    """Closed-form CCA of the accumulated pairs.

    Args:
        dim: k, number of canonical directions (default min(D_x, D_y)).
        ridge: added to the diagonals of both covariances (released code: 1e-4).
        power: the projections are scaled by correlations ** power (normalized CCA).
    """
    mean_x, mean_y, s11, s22, s12 = moments.covariances(phrase_table)
    _check_finite(s11, "region")
    _check_finite(s22, "phrase")
    for s in (s11, s22):  # fresh arrays: the ridge goes on in place (no 288 MB copy of a 6,000-d S22)
        s[np.diag_indices_from(s)] += ridge
    w1, w2 = _Whitening(s11), _Whitening(s22)
    del s11, s22
    u, d, vt = np.linalg.svd(w2.right(w1.left(s12)), full_matrices=False)
    k = min(len(d), dim or len(d))
    return CCAProjection(mean_x, mean_y, w1.transposed_left(u[:, :k]), w2.transposed_left(vt[:k].T), d[:k], d[:k] ** power)


def fit_cca_paired(x, y, dim: int | None = None, ridge: float = 1e-4, power: float = 1.0) -> CCAProjection:
    """:func:`fit_cca` of paired rows ``x`` [N, D_x], ``y`` [N, D_y] (row i of each is pair i; every
    pair its own "phrase"), e.g. Deep CCA's outputs. Holds an [N, D_x] float64 table of region sums."""
    y = np.asarray(y)
    moments = PhraseGroupedMoments(np.shape(x)[1], len(y))
    moments.add(x, np.arange(len(y)))
    return fit_cca(moments, y, dim, ridge, power)
