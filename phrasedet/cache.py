"""Where phrasedet caches what it computes once: the built-in dataset, word2vec, encoded vocabularies."""
import os

__all__ = ["default_cache_dir"]


def default_cache_dir(configured: str = "") -> str:
    """``configured`` if given, else ``$PHRASEDET_CACHE``, else ``~/.cache/phrasedet``."""
    return os.path.expanduser(configured or os.environ.get("PHRASEDET_CACHE") or os.path.join("~", ".cache", "phrasedet"))
