"""Deep CCA fitted on the positive (region, phrase) pairs of stage 2 of the recipe (the pairs the
linear CCA is fitted on, :func:`phrasedet.modeling.cca.fitting.training_pairs`), and its file.

The file is a ``.npz`` with ``{region,phrase}_{mean,std,weight,bias}`` (each view's layer) and
``cca_{mean_x,mean_y,A,B,correlations,scale}`` (the linear CCA on the layers' outputs).
"""
import logging
import time

import numpy as np

from phrasedet.fileio import BadFileError, load_array_file, npz_array

from .deep import DeepCCAProjector, train_deep_cca
from .fitting import _LAYER_SHAPES, _check_shape, save_npz
from .linear import CCAProjection

__all__ = ["fit_deep_cca_from_pairs", "load_deep_cca", "save_deep_cca"]

logger = logging.getLogger(__name__)

# The shape of each array of a view's layer, in named sizes (D: the view's input size, E: the output size).
_VIEW_SHAPES = {"mean": ("D",), "std": ("D",), "weight": ("E", "D"), "bias": ("E",)}


def fit_deep_cca_from_pairs(cfg, pair_batches, phrase_table) -> DeepCCAProjector:
    """Deep CCA of ``cfg.PHRASEDET.DEEP_CCA`` (seed ``cfg.SEED``) on the pairs.

    Args:
        pair_batches: a callable giving a fresh iterator of ``(regions [N, D_r], phrase_ids [N])``.
        phrase_table: [V, D_t] phrase features that ``phrase_ids`` index.
    """
    c = cfg.PHRASEDET.DEEP_CCA
    batches = list(pair_batches())
    if not batches:
        raise ValueError("no positive (region, phrase) pair was found: is the stage-1 detector trained?")
    regions = np.concatenate([r for r, _ in batches])
    phrases = np.asarray(phrase_table)[np.concatenate([ids for _, ids in batches])]
    out_dim = c.OUT_DIM or min(regions.shape[1], phrases.shape[1])
    start = time.perf_counter()
    projector = train_deep_cca(regions, phrases, out_dim, c.BATCH_SIZE, c.ITERS, c.LR, c.RIDGE, cfg.SEED,
                               power=cfg.PHRASEDET.CCA.POWER)
    logger.info("Deep CCA: %d pairs, %d -> %d and %d -> %d dims, batch %d, %d steps; top correlations %s (%.1f s)", len(regions),
                regions.shape[1], out_dim, phrases.shape[1], out_dim, min(c.BATCH_SIZE, len(regions)), c.ITERS,
                np.round(projector.cca.correlations[:5], 3).tolist(), time.perf_counter() - start)
    return projector


def save_deep_cca(path: str, projector: DeepCCAProjector) -> None:
    """Write ``projector`` to ``path`` (.npz, see the module docstring)."""
    arrays = {f"{side}_{name}": getattr(projector, f"{side}_{name}") for side in ("region", "phrase") for name in _VIEW_SHAPES}
    arrays.update({f"cca_{k}": v for k, v in vars(projector.cca).items()})
    save_npz(path, arrays)


def load_deep_cca(path: str) -> DeepCCAProjector:
    """The :class:`DeepCCAProjector` that :func:`save_deep_cca` wrote.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        phrasedet.fileio.BadFileError: naming the file (and key) when numpy cannot read it, it is
            not a .npz, an array is missing, is not a finite float array of its shape (a view's
            ``mean``, ``std`` [D], ``weight`` [E, D], ``bias`` [E]; the CCA's inputs of size E), or a
            ``std`` is not positive.
    """
    data = load_array_file(path, "Deep CCA file")
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise BadFileError(f"{path}: a Deep CCA file must be a .npz (keys region_*, phrase_*, cca_*), got a single array")
    with data as f:
        arrays, out = {}, {}
        for side in ("region", "phrase"):
            sizes = {} if not out else {"E": out["E"]}
            for name, expected in _VIEW_SHAPES.items():
                key = f"{side}_{name}"
                arrays[key] = npz_array(f, path, key)
                _check_shape(path, key, arrays[key], expected, sizes)
            out.setdefault("E", sizes["E"])
            if not (arrays[f"{side}_std"] > 0).all():
                raise BadFileError(f"{path}: key '{side}_std': standard deviations must be positive")
        cca, sizes = {}, {"D_x": out["E"], "D_y": out["E"]}
        for name, expected in _LAYER_SHAPES.items():
            cca[name] = npz_array(f, path, f"cca_{name}")
            _check_shape(path, f"cca_{name}", cca[name], expected, sizes)
    return DeepCCAProjector(**arrays, cca=CCAProjection(**cca))
