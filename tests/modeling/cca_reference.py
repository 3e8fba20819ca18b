"""Textbook regularized CCA in numpy, written apart from phrasedet's code so tests can check it."""
import numpy as np


def numpy_regularized_cca(x, y, ridge):
    """Canonical correlations and x-side directions of (x [N, Dx], y [N, Dy]): eigen-whitening of
    S11 + r I and S22 + r I (sample covariances), then the SVD of the whitened S12, as the released
    code's linear_cca. Returns (correlations [min(Dx, Dy)], A [Dx, Dx])."""
    x, y = x - x.mean(0), y - y.mean(0)
    n = len(x)
    s11 = x.T @ x / (n - 1) + ridge * np.eye(x.shape[1])
    s22 = y.T @ y / (n - 1) + ridge * np.eye(y.shape[1])

    def inv_sqrt(s):
        w, v = np.linalg.eigh(s)
        return (v / np.sqrt(w)) @ v.T

    u, d, _ = np.linalg.svd(inv_sqrt(s11) @ (x.T @ y / (n - 1)) @ inv_sqrt(s22))
    return d, inv_sqrt(s11) @ u
