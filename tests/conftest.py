import builtins
import os
import shutil

import pytest


def pytest_configure(config):
    """Under pytest-xdist (``make test`` runs ``-n auto``: one worker per core), each worker and
    the tools it runs in subprocesses use their share of the cores, not all of them each: two
    workers with two threads apiece on two cores run slower than one."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers and "OMP_NUM_THREADS" not in os.environ:
        import torch

        threads = max(1, (os.cpu_count() or 1) // int(workers))
        os.environ["OMP_NUM_THREADS"] = str(threads)  # inherited by every subprocess
        torch.set_num_threads(threads)


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


@pytest.fixture(scope="session", autouse=True)
def _session_tmp_removed_when_asked(tmp_path_factory):
    """With ``PHRASEDET_REMOVE_SESSION_TMP`` set (``tools/mutation.py`` sets it), the session's
    temporary folder is removed when the session ends. mutmut runs each mutant as a pytest session
    in a forked process that leaves by ``os._exit``, where pytest's own clean-up of old sessions'
    folders (at interpreter exit) never runs; the checkpoint tests write 0.9 GB per session."""
    yield
    if os.environ.get("PHRASEDET_REMOVE_SESSION_TMP"):
        shutil.rmtree(tmp_path_factory.getbasetemp(), ignore_errors=True)


@pytest.fixture(scope="session")
def builtin_root():
    """The built-in dataset at its default size (generated once per session, a few seconds)."""
    from phrasedet.data.synthetic import ensure_builtin_dataset

    return ensure_builtin_dataset()


def _latin1_default_open(file, mode="r", *args, encoding=None, **kwargs):
    if "b" not in mode and encoding is None:
        encoding = "latin-1"
    return builtins.open(file, mode, *args, encoding=encoding, **kwargs)


@pytest.fixture
def latin1_locale(monkeypatch):
    """``latin1_locale(module)`` simulates, inside ``module``, a machine whose preferred encoding is
    Latin-1: a text ``open()`` there without an explicit encoding writes "é" as the single byte
    0xe9 (a UTF-8 file must not depend on the locale). Undone at the end of the test."""
    def patch(module):
        monkeypatch.setattr(module, "open", _latin1_default_open, raising=False)
    return patch


@pytest.fixture
def wordnet_reader(tmp_path, monkeypatch):
    """A real nltk WordNet reader built from Debian's WordNet database in a temporary nltk_data;
    skips the test where that database is not installed (no test depends on ~/nltk_data)."""
    import nltk

    from phrasedet.text.wordnet import DEBIAN_WORDNET_DIR, install_wordnet

    if not os.path.isfile(os.path.join(DEBIAN_WORDNET_DIR, "index.sense")):
        pytest.skip("no WordNet database here (apt-get install wordnet-base wordnet-sense-index)")
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    target = install_wordnet(str(tmp_path))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)] + nltk.data.path)
    return WordNetCorpusReader(target, None)


class _MissingWordNet:
    def ensure_loaded(self):
        raise LookupError("Resource wordnet not found.")


@pytest.fixture
def missing_wordnet(monkeypatch):
    """nltk's ``wordnet`` corpus replaced, for this test, by one whose data is not installed."""
    import nltk

    monkeypatch.setattr(nltk.corpus, "wordnet", _MissingWordNet())
