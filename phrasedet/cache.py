"""Where phrasedet caches what it computes once (the built-in dataset, the built-in pretrained CNN,
word2vec, encoded vocabularies), and how a cached folder is made once and whole."""
import contextlib
import fcntl
import os
import shutil
import tempfile
from typing import Callable

__all__ = ["default_cache_dir", "build_once", "exclusive"]


def default_cache_dir(configured: str = "") -> str:
    """``configured`` if given, else ``$PHRASEDET_CACHE``, else ``~/.cache/phrasedet``."""
    return os.path.expanduser(configured or os.environ.get("PHRASEDET_CACHE") or os.path.join("~", ".cache", "phrasedet"))


def build_once(root: str, build: Callable[[str], object], done: Callable[[str], bool] = os.path.isdir):
    """Make the cached folder ``root`` with ``build(tmp)`` unless ``done(root)``; returns what
    ``build`` returned, or None when the folder was there.

    ``build`` writes into a temporary sibling folder that is renamed to ``root`` when it returns,
    under an exclusive ``fcntl.flock`` on ``.<name>.lock`` beside it: a crash never leaves a half
    folder (the temporary one is removed), and concurrent processes build it once.
    """
    if done(root):
        return None
    parent, name = os.path.split(os.path.abspath(root))
    with exclusive(os.path.join(parent, f".{name}.lock")):
        if done(root):  # another process finished it while we waited
            return None
        tmp = tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=parent)
        try:
            os.chmod(tmp, 0o755)
            result = build(tmp)
            os.rename(tmp, root)
        finally:
            if os.path.isdir(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
        return result


@contextlib.contextmanager
def exclusive(lock_file: str):
    """Hold an exclusive ``fcntl.flock`` on ``lock_file`` (made, with its folder, if missing) for
    the ``with`` block: processes that enter it with the same file pass one at a time."""
    os.makedirs(os.path.dirname(os.path.abspath(lock_file)), exist_ok=True)
    with open(lock_file, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
