"""phrasedet/cache.py: a cached folder made once and whole (``build_once``), and the lock that
lets concurrent processes through one at a time (``exclusive``)."""
import fcntl
import multiprocessing
import os

import pytest

from phrasedet.cache import build_once, exclusive


def _held_elsewhere(lock_file):
    """Whether another open file holds ``lock_file``'s flock (a non-blocking try fails)."""
    with open(lock_file) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def test_exclusive_holds_the_lock_for_its_block_only_and_makes_its_folder(tmp_path):
    lock = tmp_path / "new" / ".x.lock"
    ctx = multiprocessing.get_context("fork")
    inside, release = ctx.Event(), ctx.Event()

    def hold():
        with exclusive(str(lock)):
            inside.set()
            release.wait(120)

    child = ctx.Process(target=hold)
    child.start()
    try:
        assert inside.wait(120) and _held_elsewhere(lock)  # another process is in the block: we would wait
    finally:
        release.set()
        child.join(120)
    assert child.exitcode == 0 and not _held_elsewhere(lock)
    with exclusive(str(lock)):
        assert _held_elsewhere(lock)
    assert not _held_elsewhere(lock)


def test_build_once_builds_in_a_temporary_folder_under_the_lock_and_only_once(tmp_path):
    root = tmp_path / "cache" / "thing"
    seen = []

    def build(tmp):
        seen.append((os.path.dirname(tmp), os.path.basename(tmp).startswith(".thing.tmp-"),
                     _held_elsewhere(tmp_path / "cache" / ".thing.lock"), os.path.exists(root)))
        with open(os.path.join(tmp, "data"), "w") as f:
            f.write("x")
        return 7

    assert build_once(str(root), build) == 7
    assert seen == [(str(tmp_path / "cache"), True, True, False)] and (root / "data").read_text() == "x"
    assert build_once(str(root), build) is None and len(seen) == 1
    assert sorted(os.listdir(tmp_path / "cache")) == [".thing.lock", "thing"]


def test_a_failed_build_leaves_nothing_and_done_decides_what_is_there(tmp_path):
    root = tmp_path / "thing"

    def fail(tmp):
        raise RuntimeError("no")

    with pytest.raises(RuntimeError, match="^no$"):
        build_once(str(root), fail)
    assert os.listdir(tmp_path) == [".thing.lock"]
    root.mkdir()  # there, but not done by this rule: built into
    assert build_once(str(root), lambda tmp: open(os.path.join(tmp, "ok"), "w").close(),
                      done=lambda r: os.path.isfile(os.path.join(r, "ok"))) is None and (root / "ok").is_file()
