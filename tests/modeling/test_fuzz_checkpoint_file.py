"""Fuzz tests (tests/fuzz.py) of the checkpoint readers (``torch.load(weights_only=True)``): a
damaged ``.pth`` loads, or fails with a BadFileError naming the file; a missing file stays a
FileNotFoundError."""
import io

import pytest
import torch
from hypothesis import given
from torch import nn

from phrasedet.engine.staged.model_surgery import load_weights
from phrasedet.fileio import BadFileError
from phrasedet.modeling.checkpoint import load_backbone_weights, load_checkpoint_state
from tests.fuzz import check_reader, damaged_bytes, fuzz_settings, write_file


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))


def _checkpoint(state) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


CHECKPOINT = _checkpoint({"model": {f"backbone.{k}": v for k, v in _model().state_dict().items()}, "iteration": 7})


@fuzz_settings
@given(data=damaged_bytes(CHECKPOINT))
def test_backbone_weights(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "model_final.pth", data)
    check_reader(lambda: load_backbone_weights(_model(), path), path)


@fuzz_settings
@given(data=damaged_bytes(_checkpoint(_model().state_dict())))
def test_load_weights(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "stage1.pth", data)
    check_reader(lambda: load_weights(_model(), path), path)


def test_messages(tmp_path):
    path = tmp_path / "model_final.pth"
    path.write_bytes(CHECKPOINT[: len(CHECKPOINT) // 2])
    with pytest.raises(BadFileError, match=rf"^{path}: not a readable checkpoint \(RuntimeError: "):
        load_checkpoint_state(str(path))
    path.write_bytes(_checkpoint([torch.zeros(2)]))
    with pytest.raises(BadFileError, match=rf"^{path}: a checkpoint must hold a state dict \{{name: tensor\}} "
                                           r"\(or one under 'model'\), got list$"):
        load_weights(_model(), str(path))
    with pytest.raises(FileNotFoundError, match="checkpoint .*none.pth' does not exist"):
        load_weights(_model(), str(tmp_path / "none.pth"))
