"""Fit (stacked) CCA on positive (region, phrase) pairs collected with a trained phrase detector
over a whole training set (paper 003 Sec. 4.1; released code ``tools/compute_cca.py``), or over
its first ``PHRASEDET.CCA.MAX_IMAGES`` images.

For every ground-truth phrase instance of an image, the proposal of the stage-1 model with the
highest IoU is a positive pair if that IoU is at least 0.6; at most ``max_pairs_per_image``
pairs are kept per image. Layer 1 is fitted on the raw features; layer 2 on the ReLU of layer 1's
projections of the same pairs (a second pass over the data, so memory stays bounded).
"""
import logging
import os
import time

import numpy as np
import torch
from detectron2.data import DatasetCatalog, build_detection_test_loader
from detectron2.structures import pairwise_iou
from torch.utils.data import SequentialSampler

from phrasedet.data import PhraseDatasetMapper, training_vocabulary
from phrasedet.fileio import BadFileError, load_array_file, npz_array

from .linear import CCAProjection, PhraseGroupedMoments, fit_cca

__all__ = [
    "cca_layer_dims",
    "collect_positive_pairs",
    "fit_cca_from_detector",
    "fit_stacked_cca",
    "load_cca_layers",
    "pair_images",
    "replayable",
    "save_cca_layers",
    "save_npz",
    "training_pairs",
]

logger = logging.getLogger(__name__)


@torch.no_grad()
def collect_positive_pairs(model, data_loader, phrase_index, iou_thresh=0.6, max_pairs_per_image=10):
    """Yield ``(region_feats [N, D_r] float32 numpy, phrase_ids [N])`` batches, one per loader batch.

    Args:
        model: a :class:`PhraseRCNN` (put in eval mode here).
        data_loader: yields lists of mapped inputs with ``instances`` (``gt_boxes``,
            ``gt_phrase_ids``) and ``phrases`` (a test-mode :class:`PhraseDatasetMapper`).
        phrase_index: dict phrase -> row of the phrase table.
    """
    model.eval()
    for inputs in data_loader:
        images = model.preprocess_image(inputs)
        features = model.backbone(images.tensor)
        proposals, _ = model.proposal_generator(images, features, None)
        boxes, phrase_ids = [], []
        for x, props in zip(inputs, proposals):
            gt = x["instances"].to(model.device)
            keep_boxes, keep_ids = [], []
            if len(gt) and len(props):
                iou = pairwise_iou(gt.gt_boxes, props.proposal_boxes)  # [N, R]
                best, arg = iou.max(dim=1)
                for n in torch.argsort(best, descending=True).tolist()[:max_pairs_per_image]:
                    if best[n] >= iou_thresh and gt.gt_phrase_ids[n] >= 0:
                        keep_boxes.append(props.proposal_boxes.tensor[arg[n]])
                        keep_ids.append(phrase_index[x["phrases"][gt.gt_phrase_ids[n]]])
            boxes.append(type(props.proposal_boxes)(torch.stack(keep_boxes) if keep_boxes else props.proposal_boxes.tensor[:0]))
            phrase_ids.extend(keep_ids)
        if phrase_ids:
            regions = model.roi_heads.region_features(features, boxes, images.image_sizes)
            yield regions.cpu().numpy(), np.asarray(phrase_ids)


def replayable(make_batches, max_bytes=2 << 30):
    """A callable returning ``make_batches()``'s batches again and again, running the (slow)
    producer once while the batches fit in ``max_bytes``, and again per call beyond that."""
    cache, state = [], {"complete": False, "overflow": False}

    def batches():
        if state["complete"]:
            yield from cache
            return
        size = 0
        for batch in make_batches():
            if not state["overflow"]:
                size += sum(a.nbytes for a in batch)
                if size <= max_bytes:
                    cache.append(batch)
                else:
                    state["overflow"] = True
                    cache.clear()
            yield batch
        state["complete"] = not state["overflow"]

    return batches


def _relu_projection(side_mean, side_matrix, side_scale):
    return lambda v: np.maximum(((v - side_mean) @ side_matrix) * side_scale, 0.0)


def fit_stacked_cca(pair_batches, phrase_table, dims, ridge=1e-4, power=1.0):
    """Fit ``len(dims)`` CCA layers, layer l+1 on the ReLU of layer l's projections.

    Args:
        pair_batches: a callable returning a fresh iterator of ``(regions [N, D_r], phrase_ids [N])``
            (called once per layer).
        phrase_table: [V, D_t] phrase features that ``phrase_ids`` index.
        dims: output size of each layer, e.g. (1024, 1024).

    Returns:
        list of :class:`CCAProjection`, one per layer.
    """
    layers, region_fn = [], (lambda v: v)
    table = np.asarray(phrase_table)  # fit_cca upcasts a float32 table in chunks: no float64 copy of it
    for level, dim in enumerate(dims):
        start = time.perf_counter()
        moments = None
        for regions, ids in pair_batches():
            x = region_fn(np.asarray(regions, dtype=np.float64))
            if moments is None:
                moments = PhraseGroupedMoments(x.shape[1], len(table))
            moments.add(x, ids)
        if moments is None:
            raise ValueError("no positive (region, phrase) pair was found: is the stage-1 detector trained?")
        cca = fit_cca(moments, table, dim, ridge, power)
        layers.append(cca)
        logger.info("CCA layer %d: %d pairs, %d phrases, %d -> %d dims, top correlations %s (%.1f s)", level + 1, moments.n,
                    int((moments.count_per_phrase > 0).sum()), x.shape[1], len(cca.correlations),
                    np.round(cca.correlations[:5], 3).tolist(), time.perf_counter() - start)
        previous = region_fn
        project = _relu_projection(cca.mean_x, cca.A, cca.scale)
        region_fn = (lambda f, g: (lambda v: g(f(v))))(previous, project)
        table = _relu_projection(cca.mean_y, cca.B, cca.scale)(table)
    return layers


def cca_layer_dims(dims, region_dim: int, phrase_dim: int):
    """``PHRASEDET.CCA.DIMS`` resolved: a 0 entry means the previous layer's size, starting from
    min(D_r, D_t) (paper 003's code: min(D_r, D_t) then 1024)."""
    out, size = [], min(region_dim, phrase_dim)
    for d in dims:
        size = d or size
        out.append(size)
    return out


def training_pairs(cfg, model):
    """The positive pairs ``model`` (a trained :class:`PhraseRCNN`) finds over every image of
    ``cfg.DATASETS.TRAIN``, or its first ``MAX_IMAGES`` (:func:`pair_images`;
    ``cfg.PHRASEDET.CCA.PAIR_IOU``, ``MAX_PAIRS_PER_IMAGE``).

    The whole training set is read in this process (not sharded across processes), once if the
    pairs fit in 2 GB, else once per pass. Returns ``(pair_batches, phrase_table)``: a callable
    giving a fresh iterator of ``(regions [N, D_r], phrase_ids [N])`` (:func:`replayable`), and the
    phrase features [V, D_t] that ``phrase_ids`` index.
    """
    c = cfg.PHRASEDET.CCA
    phrases = training_vocabulary(cfg.DATASETS.TRAIN).phrases()
    table = model.phrase_bank(phrases).cpu().numpy()
    index = {p: i for i, p in enumerate(phrases)}
    mapper = PhraseDatasetMapper(cfg, is_train=False)
    images = pair_images(cfg)

    def batches():
        for dicts in images:
            loader = build_detection_test_loader(dicts, mapper=mapper, sampler=SequentialSampler(dicts), num_workers=cfg.DATALOADER.NUM_WORKERS)
            yield from collect_positive_pairs(model, loader, index, c.PAIR_IOU, c.MAX_PAIRS_PER_IMAGE)

    return replayable(batches), table


def pair_images(cfg) -> list:
    """The records the CCA pairs come from, one list per dataset of ``cfg.DATASETS.TRAIN``: every
    image, or with ``PHRASEDET.CCA.MAX_IMAGES`` N > 0 the first N images of the datasets taken in
    order (logged: how many of how many)."""
    cap = cfg.PHRASEDET.CCA.MAX_IMAGES
    if cap < 0:
        raise ValueError(f"PHRASEDET.CCA.MAX_IMAGES must be 0 (every training image) or positive, got {cap}")
    out, taken, total = [], 0, 0
    for name in cfg.DATASETS.TRAIN:
        dicts = DatasetCatalog.get(name)
        total += len(dicts)
        part = dicts[: cap - taken] if cap else dicts
        if part:
            out.append(part)
            taken += len(part)
    if cap:
        logger.info("CCA pairs from the first %d of the %d training images (PHRASEDET.CCA.MAX_IMAGES)", taken, total)
    return out


def fit_cca_from_detector(cfg, model, pairs=None):
    """Stacked CCA of ``cfg.PHRASEDET.CCA`` fitted on the pairs ``model`` (a trained
    :class:`PhraseRCNN`) finds over the images of ``cfg.DATASETS.TRAIN`` (:func:`training_pairs`).

    Args:
        pairs: :func:`training_pairs`'s result, when collected already (e.g. for Deep CCA too).

    Returns the list of :class:`CCAProjection`.
    """
    c = cfg.PHRASEDET.CCA
    pair_batches, table = pairs or training_pairs(cfg, model)
    dims = cca_layer_dims(c.DIMS, model.roi_heads.region_features.output_dim, table.shape[1])
    return fit_stacked_cca(pair_batches, table, dims, c.RIDGE, c.POWER)


def save_npz(path: str, arrays: dict) -> None:
    """Write ``arrays`` to the .npz ``path`` through a temporary file, so a reader (or
    ``--resume``) never sees half a file."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def save_cca_layers(path: str, layers) -> None:
    """Write stacked CCA layers to ``path`` (.npz: ``layer{i}_{field}`` per layer)."""
    save_npz(path, {f"layer{i}_{k}": v for i, layer in enumerate(layers) for k, v in vars(layer).items()})


# The shape of each array of a CCA layer, in named sizes.
_LAYER_SHAPES = {"mean_x": ("D_x",), "mean_y": ("D_y",), "A": ("D_x", "k"), "B": ("D_y", "k"),
                 "correlations": ("k",), "scale": ("k",)}


def _check_shape(path: str, key: str, array: np.ndarray, expected: tuple, sizes: dict) -> None:
    """``array`` (``path``'s ``key``) must be a finite float array of shape ``expected`` (named
    sizes, e.g. ``("D_x", "k")``), each size bound in ``sizes`` by the first array that has it."""
    shape = tuple(sizes.setdefault(name, size) for name, size in zip(expected, array.shape))
    if array.dtype.kind != "f" or array.shape != shape or len(shape) != len(expected):
        want = ", ".join(f"{name} = {sizes[name]}" if name in sizes else name for name in expected)
        raise BadFileError(f"{path}: key {key!r}: expected a float array [{want}], got dtype {array.dtype} "
                           f"and shape {array.shape}")
    if not np.isfinite(array).all():
        raise BadFileError(f"{path}: key {key!r}: values must be finite numbers")


def _load_layer(f, path: str, i: int, d_in) -> CCAProjection:
    """Layer ``i`` of the opened file; ``d_in``: the previous layer's output size (None for layer 0)."""
    sizes = {} if d_in is None else {"D_x": d_in, "D_y": d_in}
    arrays = {}
    for name, expected in _LAYER_SHAPES.items():
        key = f"layer{i}_{name}"
        arrays[name] = npz_array(f, path, key)
        _check_shape(path, key, arrays[name], expected, sizes)
    return CCAProjection(**arrays)


def load_cca_layers(path: str):
    """The list of :class:`CCAProjection` that :func:`save_cca_layers` wrote.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        phrasedet.fileio.BadFileError: naming the file (and key) when numpy cannot read it, it holds
            no layer, an array is missing, is not a float array of its layer's shape
            (``mean_x [D_x]``, ``mean_y [D_y]``, ``A [D_x, k]``, ``B [D_y, k]``, ``correlations [k]``,
            ``scale [k]``; a layer after the first has ``D_x = D_y =`` the previous ``k``) or holds a
            value that is not finite.
    """
    fields = list(_LAYER_SHAPES)
    data = load_array_file(path, "CCA file")
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise BadFileError(f"{path}: a CCA file must be a .npz (keys layer0_{{{', '.join(fields)}}}), "
                           "got a single array")
    with data as f:
        n = 0
        while f"layer{n}_A" in f.files:
            n += 1
        if n == 0:
            raise BadFileError(f"{path}: no CCA layer (expected keys layer0_{{{', '.join(fields)}}})")
        layers = []
        for i in range(n):
            layers.append(_load_layer(f, path, i, layers[-1].A.shape[1] if layers else None))
        return layers
