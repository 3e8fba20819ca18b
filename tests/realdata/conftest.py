import pytest

from .miniature import build_miniature


@pytest.fixture(scope="session")
def miniature_root(tmp_path_factory):
    """The miniature ``$PHRASEDET_DATASETS`` tree (tests/realdata/miniature.py), built once per session."""
    return build_miniature(str(tmp_path_factory.mktemp("miniature_datasets")))


@pytest.fixture
def miniature_datasets(miniature_root, monkeypatch):
    """``$PHRASEDET_DATASETS`` pointing at the miniature tree for this test."""
    monkeypatch.setenv("PHRASEDET_DATASETS", miniature_root)
    return miniature_root
