import builtins
import logging
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


#: The longest tests (a full run's ``--durations``, longest first): collected first, so that they
#: start first and the run does not end on one long test. ``make test`` runs ``--dist worksteal``:
#: with the default ``--dist load`` this order left one worker idle behind the other's queue (seen
#: once, 2026-11-27). A test missing from the list only runs in its usual place.
SLOW_FIRST = (
    "tests/test_compare_retrieval.py::test_paper_001_rows_two_stages_on_the_cnn_stage_one_alone_on_the_oracle",
    "tests/test_compare_retrieval.py::test_every_stage_runs_on_both_representations_and_the_verdicts_come_out",
    "tests/test_compare_retrieval.py::test_records_carry_a_comparison_to_a_new_machine",
    "tests/test_recipe.py::test_recipe_runs_every_stage_resumes_where_it_stopped_and_evaluates_again",
    "tests/test_recipe.py::test_cca_classifier_recipe_reuses_a_detector_and_trains_nothing",
    "tests/test_compare_retrieval.py::test_compare_pointing_on_cnn_maps_and_oracle_maps",
    "tests/test_retrieval_train_net.py::test_training_raises_rsum_well_above_an_untrained_model",
    "tests/test_retrieval_train_net.py::test_selection_tests_the_best_validation_snapshot_and_keeps_the_curve",
    "tests/modeling/test_checkpoint_loading.py::test_raw_torchvision_resnet_gives_torchvision_features",
    "tests/test_train_net.py::test_two_cpu_processes_train_and_evaluate_then_resume",
    "tests/test_recipe.py::test_the_released_schedule_selects_on_validation_and_tests_the_selected_model",
    "tests/test_retrieval_train_net.py::test_two_processes_unfreeze_the_backbone_then_eval_only_and_saved_embeddings_agree",
    "tests/test_pointing_train_net.py::test_dsve_loc_trains_then_plays_the_pointing_game_and_eval_only_agrees",
    "tests/data/test_caption_facts.py::test_the_measure_agrees_with_an_independent_count_on_the_default_dataset",
    "tests/test_pointing_train_net.py::test_dsve_loc_on_the_oracle_maps_trains_points_and_keeps_them_in_the_image",
)


def pytest_collection_modifyitems(config, items):
    """Move the tests of :data:`SLOW_FIRST` to the front, in its order (the rest keep theirs)."""
    rank = {nodeid: k for k, nodeid in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid, len(rank)))  # stable: the others keep their order


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
    """With ``PHRASEDET_REMOVE_SESSION_TMP`` set (``tools/testing/mutation.py`` sets it), the session's
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


@pytest.fixture(scope="session")
def oracle_global(builtin_root, tmp_path_factory):
    """The oracle's global features of the built-in caption and pointing splits (a folder; written
    once per session, about 25 s on a shared core; tests only read it)."""
    from phrasedet.engine.comparison.protocol import oracle_features

    return oracle_features(str(tmp_path_factory.mktemp("oracle")), resume=False)["global"]


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



@pytest.fixture(autouse=True)
def _loggers_reach_caplog():
    """Every test's ``caplog`` sees the records of Detectron2's and phrasedet's loggers.
    ``detectron2.utils.logger.setup_logger`` (run by any earlier test in the same worker that
    trains or evaluates in-process) sets ``propagate=False`` on its logger, so its records never
    reached the root handler of ``caplog``: a test reading them passed or failed with the order
    pytest-xdist gave it (CI, 2026-11-28)."""
    loggers = [logging.getLogger(name) for name in ("detectron2", "phrasedet")]
    saved = [logger.propagate for logger in loggers]
    for logger in loggers:
        logger.propagate = True
    yield
    for logger, propagate in zip(loggers, saved):
        logger.propagate = propagate
