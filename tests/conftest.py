import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _hermetic_cache(tmp_path_factory):
    """Tests never read or write the user's ~/.cache/phrasedet: one fresh cache per session."""
    old = os.environ.get("PHRASEDET_CACHE")
    os.environ["PHRASEDET_CACHE"] = str(tmp_path_factory.mktemp("phrasedet_cache"))
    yield
    if old is None:
        os.environ.pop("PHRASEDET_CACHE", None)
    else:
        os.environ["PHRASEDET_CACHE"] = old


@pytest.fixture(scope="session")
def builtin_root():
    """The built-in dataset at its default size (generated once per session, a few seconds)."""
    from phrasedet.data.synthetic import ensure_builtin_dataset

    return ensure_builtin_dataset()
