"""Fuzz tests (tests/fuzz.py) of the fitted-CCA file (``cca.npz``): a damaged file loads, or fails
with a BadFileError naming the file (and the key)."""
import io
import os
import tempfile

import numpy as np
import pytest
from hypothesis import given

from phrasedet.fileio import BadFileError
from phrasedet.modeling.cca import PhraseGroupedMoments, fit_cca
from phrasedet.modeling.cca.fitting import load_cca_layers, save_cca_layers
from tests.fuzz import check_reader, damaged_bytes, fuzz_settings, write_file
from tests.fuzz_npz import damaged_npz


def _layers():
    """Two stacked layers: 5 x 4 -> 3, then 3 x 3 -> 2."""
    rng = np.random.default_rng(0)
    layers, dims = [], [(5, 4, 3), (3, 3, 2)]
    for dx, dy, k in dims:
        table = rng.standard_normal((12, dy))
        ids = rng.integers(0, 12, 80)
        moments = PhraseGroupedMoments(dx, 12)
        moments.add(table[ids] @ rng.standard_normal((dy, dx)) + rng.standard_normal((80, dx)), ids)
        layers.append(fit_cca(moments, table, dim=k))
    return layers


def _valid_file() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "cca.npz")
        save_cca_layers(path, _layers())
        with open(path, "rb") as f:
            return f.read()


CCA_FILE = _valid_file()
with np.load(io.BytesIO(CCA_FILE)) as _npz:
    CCA_ARRAYS = {k: _npz[k] for k in _npz.files}


def _check_loaded(layers):
    if isinstance(layers, list):
        for layer in layers:
            assert layer.A.shape == (len(layer.mean_x), len(layer.scale))
            assert layer.B.shape == (len(layer.mean_y), len(layer.scale))
            assert all(np.isfinite(v).all() for v in vars(layer).values())


@fuzz_settings
@given(data=damaged_npz(CCA_ARRAYS) | damaged_bytes(CCA_FILE))
def test_cca_file(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "cca.npz", data)
    _check_loaded(check_reader(lambda: load_cca_layers(path), path))


def test_round_trip_and_messages(tmp_path):
    path = tmp_path / "cca.npz"
    path.write_bytes(CCA_FILE)
    for got, want in zip(load_cca_layers(str(path)), _layers()):
        assert all(np.array_equal(getattr(got, k), getattr(want, k)) for k in vars(want))
    np.savez(path, **{**CCA_ARRAYS, "layer1_A": np.zeros((4, 2))})
    with pytest.raises(BadFileError, match=rf"^{path}: key 'layer1_A': expected a float array \[D_x = 3, k = 2\], "
                                           r"got dtype float64 and shape \(4, 2\)$"):
        load_cca_layers(str(path))
    np.savez(path, **{k: v for k, v in CCA_ARRAYS.items() if k != "layer0_scale"})
    with pytest.raises(BadFileError, match=rf"^{path}: missing key 'layer0_scale'"):
        load_cca_layers(str(path))
    with pytest.raises(FileNotFoundError, match="CCA file"):
        load_cca_layers(str(tmp_path / "none.npz"))
