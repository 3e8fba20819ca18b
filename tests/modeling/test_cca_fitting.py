"""phrasedet/modeling/cca/fitting.py: layer sizes, fitting from a detector, and the saved CCA-layer file."""
import logging
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from phrasedet.fileio import BadFileError
from phrasedet.modeling.cca import fitting
from phrasedet.modeling.cca import CCAProjection
from phrasedet.modeling.cca.fitting import (cca_layer_dims, fit_cca_from_detector, fit_stacked_cca, load_cca_layers,
                                            replayable, save_cca_layers)

FIELDS = "mean_x, mean_y, A, B, correlations, scale"


def _layer(d_x, d_y, k, offset=0.0):
    """A CCAProjection of distinct, exactly representable values (no fit needed to round-trip a file)."""
    def seq(*shape):
        return np.arange(math.prod(shape), dtype=np.float64).reshape(shape) / 8 + offset
    return CCAProjection(seq(d_x), seq(d_y), seq(d_x, k), seq(d_y, k), seq(k) / 100, seq(k) / 50)


def _layers(n):
    """1, 2 or 3 stacked layers: 5 x 4 -> 3, then 3 x 3 -> 2, then 2 x 2 -> 1."""
    dims = [(5, 4, 3), (3, 3, 2), (2, 2, 1)]
    return [_layer(*d, offset=i) for i, d in enumerate(dims[:n])]


def _arrays(layers):
    return {f"layer{i}_{k}": v for i, layer in enumerate(layers) for k, v in vars(layer).items()}


# ---------------------------------------------------------------- the file
@pytest.mark.parametrize("n", [1, 2, 3])
def test_saved_layers_load_back_exactly_under_their_keys(tmp_path, n):
    """One .npz key per layer and field, ``layer{i}_{field}``; every layer comes back, in order and
    bit for bit (1 and 3 layers: the loader counts the layers, it does not assume two)."""
    path = str(tmp_path / "sub" / "cca.npz")  # the folder is created
    layers = _layers(n)
    save_cca_layers(path, layers)
    with np.load(path) as f:
        assert sorted(f.files) == sorted(_arrays(layers))
    back = load_cca_layers(path)
    assert len(back) == n
    for got, want in zip(back, layers):
        assert isinstance(got, CCAProjection)
        for field, value in vars(want).items():
            np.testing.assert_array_equal(getattr(got, field), value)


def _bad_file(tmp_path, change):
    """Two saved layers, with ``change`` (key -> array, or None to drop the key) applied."""
    arrays = _arrays(_layers(2))
    for key, value in change.items():
        if value is None:
            del arrays[key]
        else:
            arrays[key] = value
    path = tmp_path / "cca.npz"
    np.savez(path, **arrays)
    return str(path)


_NAN_B = np.arange(12.0).reshape(4, 3)
_NAN_B[1, 2] = np.nan


@pytest.mark.parametrize("change, message", [
    ({"layer0_scale": None},
     "{path}: missing key 'layer0_scale' (the file holds ['layer0_A', 'layer0_B', 'layer0_correlations', 'layer0_mean_x', "
     "'layer0_mean_y', 'layer1_A', 'layer1_B', 'layer1_correlations', 'layer1_mean_x', 'layer1_mean_y', 'layer1_scale'])"),
    # layer 1's inputs are layer 0's k = 3 outputs: D_x = D_y = 3 before layer 1's own arrays are read
    ({"layer1_A": np.zeros((4, 2))},
     "{path}: key 'layer1_A': expected a float array [D_x = 3, k = 2], got dtype float64 and shape (4, 2)"),
    ({"layer1_mean_x": np.zeros(4), "layer1_A": np.zeros((4, 2))},
     "{path}: key 'layer1_mean_x': expected a float array [D_x = 3], got dtype float64 and shape (4,)"),
    ({"layer1_mean_y": np.zeros(4), "layer1_B": np.zeros((4, 2))},
     "{path}: key 'layer1_mean_y': expected a float array [D_y = 3], got dtype float64 and shape (4,)"),
    # layer 0: sizes bound by the first array that has them (mean_x: D_x = 5, A: k = 3)
    ({"layer0_B": np.zeros((4, 2))},
     "{path}: key 'layer0_B': expected a float array [D_y = 4, k = 3], got dtype float64 and shape (4, 2)"),
    ({"layer0_A": np.zeros(5)},  # too few dimensions: k is not bound yet and is named bare
     "{path}: key 'layer0_A': expected a float array [D_x = 5, k], got dtype float64 and shape (5,)"),
    ({"layer0_scale": np.zeros((3, 1))},  # too many dimensions
     "{path}: key 'layer0_scale': expected a float array [k = 3], got dtype float64 and shape (3, 1)"),
    ({"layer0_correlations": np.arange(3)},
     "{path}: key 'layer0_correlations': expected a float array [k = 3], got dtype int64 and shape (3,)"),
    ({"layer0_B": _NAN_B},
     "{path}: key 'layer0_B': values must be finite numbers"),
    ({"layer1_scale": np.array([1.0, np.inf])},
     "{path}: key 'layer1_scale': values must be finite numbers"),
], ids=["missing", "layer1-D_x", "layer1-mean_x", "layer1-mean_y", "layer0-B", "too-few-dims", "too-many-dims", "int",
        "nan", "inf"])
def test_a_damaged_layer_is_named_with_its_key(tmp_path, change, message):
    path = _bad_file(tmp_path, change)
    with pytest.raises(BadFileError) as e:
        load_cca_layers(path)
    assert str(e.value) == message.format(path=path)


def test_not_a_layer_file_is_named(tmp_path):
    """A missing file, a single .npy array, and a .npz without ``layer0_A``: each error names the
    file and the keys a CCA file holds."""
    missing = str(tmp_path / "none.npz")
    with pytest.raises(FileNotFoundError) as e:
        load_cca_layers(missing)
    assert str(e.value) == f"CCA file {missing!r} does not exist"
    single = str(tmp_path / "cca.npy")
    np.save(single, np.zeros(3))
    with pytest.raises(BadFileError) as e:
        load_cca_layers(single)
    assert str(e.value) == f"{single}: a CCA file must be a .npz (keys layer0_{{{FIELDS}}}), got a single array"
    empty = str(tmp_path / "other.npz")
    np.savez(empty, layer1_A=np.zeros((2, 2)), weights=np.zeros(2))  # layer 1 without a layer 0 is no layer
    with pytest.raises(BadFileError) as e:
        load_cca_layers(empty)
    assert str(e.value) == f"{empty}: no CCA layer (expected keys layer0_{{{FIELDS}}})"


# ---------------------------------------------------------------- layer sizes
@pytest.mark.parametrize("dims, expected", [
    ([0], [4]),  # 0: min(D_r = 6, D_t = 4)
    ([0, 0], [4, 4]),
    ([0, 1024], [4, 1024]),  # the paper's code: min(D_r, D_t), then 1024
    ([2, 0, 3, 0], [2, 2, 3, 3]),  # 0: the previous layer's size
    ([], []),
])
def test_layer_dims_resolve_zero_to_the_previous_size(dims, expected):
    assert cca_layer_dims(dims, 6, 4) == expected


# ---------------------------------------------------------------- fitting
# Three pairs: x = (-1, 0, 1), y = (-1, 1, 0): var x = var y = 1, cov = 0.5 (all / (n - 1) = / 2);
# with ridge r on both variances rho = 0.5 / (1 + r).
X = np.array([[-1.0], [0.0], [1.0]])
Y = np.array([[-1.0], [1.0], [0.0]])


def test_stacked_fit_defaults_are_the_released_codes_ridge_and_power():
    """ridge 1e-4 and power 1 by default: rho = 0.5 / 1.0001 and scale = rho (ridge 1.0001 would give
    0.2500, power 2 scale rho^2)."""
    (layer,) = fit_stacked_cca(lambda: iter([(X, np.arange(3))]), Y, dims=(1,))
    np.testing.assert_allclose(layer.correlations, [0.5 / 1.0001], rtol=1e-12)
    np.testing.assert_allclose(layer.scale, [0.5 / 1.0001], rtol=1e-12)


def test_stacked_fit_without_pairs_says_so():
    with pytest.raises(ValueError) as e:
        fit_stacked_cca(lambda: iter([]), Y, dims=(1,))
    assert str(e.value) == "no positive (region, phrase) pair was found: is the stage-1 detector trained?"


@pytest.mark.parametrize("max_bytes, runs", [(64, 1), (63, 2)])
def test_replayable_keeps_the_batches_while_their_total_size_fits(max_bytes, runs):
    """Two batches of 2 float64 + 2 int64 = 32 bytes each: 64 bytes in all. At max_bytes 64 (the
    total exactly: it fits) the producer runs once for two passes; at 63 it runs on every pass."""
    calls = []

    def produce():
        calls.append(1)
        for i in range(2):
            yield np.full(2, float(i)), np.array([i, i])

    batches = replayable(produce, max_bytes=max_bytes)
    for _ in range(2):
        assert [b[1].tolist() for b in batches()] == [[0, 0], [1, 1]]
    assert len(calls) == runs


class _Recorder:
    """Stands in for the data pipeline that :func:`training_pairs` wires together; records each call."""

    def __init__(self):
        self.calls = []

    def vocabulary(self, names):
        self.calls.append(("vocabulary", list(names)))
        return SimpleNamespace(phrases=lambda: ["p0", "p1", "p2"])

    def mapper(self, *args, **kwargs):
        self.calls.append(("mapper", args, kwargs))
        return "the mapper"

    def dataset(self, name):
        self.calls.append(("dataset", name))
        return [f"{name}/image{i}" for i in range(3)]

    def loader(self, dicts, **kwargs):
        sampler = kwargs.get("sampler")
        self.calls.append(("loader", dicts, kwargs.get("mapper"), kwargs.get("num_workers"),
                           list(sampler) if sampler is not None else None))
        return f"loader of {dicts[0].split('/')[0]}"

    def pairs(self, model, loader, index, iou, cap):
        self.calls.append(("pairs", model, loader, index, iou, cap))
        yield X, np.arange(3)


def _recorded_pipeline(monkeypatch, max_images=0):
    rec = _Recorder()
    for name, fake in (("training_vocabulary", rec.vocabulary), ("PhraseDatasetMapper", rec.mapper),
                       ("DatasetCatalog", SimpleNamespace(get=rec.dataset)),
                       ("build_detection_test_loader", rec.loader), ("collect_positive_pairs", rec.pairs)):
        monkeypatch.setattr(fitting, name, fake)
    cca = SimpleNamespace(PAIR_IOU=0.7, MAX_PAIRS_PER_IMAGE=4, RIDGE=1.0, POWER=2.0, DIMS=[0], MAX_IMAGES=max_images)
    cfg = SimpleNamespace(PHRASEDET=SimpleNamespace(CCA=cca), DATASETS=SimpleNamespace(TRAIN=("a", "b")),
                          DATALOADER=SimpleNamespace(NUM_WORKERS=3))
    return rec, cfg


def test_fit_from_detector_collects_the_training_pairs_of_every_training_set(monkeypatch):
    """Without ``pairs``: the phrase table is the detector's phrase bank of the training vocabulary,
    each training set is read in order by a test-mode mapper with a sequential sampler, and
    PAIR_IOU / MAX_PAIRS_PER_IMAGE reach the pair collection; the fit uses RIDGE, POWER and DIMS."""
    rec, cfg = _recorded_pipeline(monkeypatch)
    bank = {"p0": -1.0, "p1": 1.0, "p2": 0.0}  # the three pairs' phrases are rows 0, 1, 2: Y
    model = SimpleNamespace(phrase_bank=lambda phrases: torch.tensor([[bank[p]] for p in phrases]),
                            roi_heads=SimpleNamespace(region_features=SimpleNamespace(output_dim=1)))
    (layer,) = fit_cca_from_detector(cfg, model)
    # both sets' pairs: X twice, with Y twice; rho = cov / (var + r) = (2 / 5) / (4 / 5 + 1) = 2 / 9
    # (n = 6: cov = 2 / 5, var = 4 / 5); power 2: scale (2 / 9)^2
    np.testing.assert_allclose(layer.correlations, [2 / 9], rtol=1e-12)
    np.testing.assert_allclose(layer.scale, [4 / 81], rtol=1e-12)
    index = {"p0": 0, "p1": 1, "p2": 2}
    mapper = rec.calls[1]
    assert mapper[0] == "mapper" and mapper[1] == (cfg,) and not mapper[2].get("is_train", True)
    assert rec.calls[0] == ("vocabulary", ["a", "b"])
    assert rec.calls[2:] == [
        ("dataset", "a"), ("dataset", "b"),
        ("loader", ["a/image0", "a/image1", "a/image2"], "the mapper", 3, [0, 1, 2]),
        ("pairs", model, "loader of a", index, 0.7, 4),
        ("loader", ["b/image0", "b/image1", "b/image2"], "the mapper", 3, [0, 1, 2]),
        ("pairs", model, "loader of b", index, 0.7, 4),
    ]


@pytest.mark.parametrize("cap, read", [
    (4, [["a/image0", "a/image1", "a/image2"], ["b/image0"]]),  # across the two training sets, in order
    (2, [["a/image0", "a/image1"]]),
    (3, [["a/image0", "a/image1", "a/image2"]]),
    (7, [["a/image0", "a/image1", "a/image2"], ["b/image0", "b/image1", "b/image2"]]),
])
def test_max_images_takes_the_first_images_of_the_training_sets_in_order(monkeypatch, caplog, cap, read):
    rec, cfg = _recorded_pipeline(monkeypatch, max_images=cap)
    model = SimpleNamespace(phrase_bank=lambda phrases: torch.zeros(len(phrases), 1))
    with caplog.at_level(logging.INFO, logger=fitting.__name__):
        batches, _ = fitting.training_pairs(cfg, model)
        list(batches())
    assert [c[1] for c in rec.calls if c[0] == "loader"] == read
    assert f"CCA pairs from the first {sum(map(len, read))} of the 6 training images" in caplog.text


def test_max_images_below_zero_is_refused(monkeypatch):
    _, cfg = _recorded_pipeline(monkeypatch, max_images=-1)
    model = SimpleNamespace(phrase_bank=lambda phrases: torch.zeros(len(phrases), 1))
    with pytest.raises(ValueError, match=r"PHRASEDET.CCA.MAX_IMAGES must be 0 \(every training image\) or positive, got -1"):
        fitting.training_pairs(cfg, model)
