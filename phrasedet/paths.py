"""Where data files named in configs are found: ``$PHRASEDET_DATASETS`` (docs/DATA.md).

Dataset names resolve under ``$PHRASEDET_DATASETS`` (``phrasedet/data/datasets/builtin.py``); so do
the relative paths of data-file keys (``MODEL.RETRIEVAL.IMAGE_FEATURES_DIR``,
``PHRASEDET.TEXT.WORD_VECTORS_PATH``): a config says ``features/flickr30k_vgg19_10crop``, and the
folder is ``$PHRASEDET_DATASETS/features/flickr30k_vgg19_10crop``. A relative path that is not
there is taken from the working directory, where the tools write (``output/features``).
"""
import os

__all__ = ["datasets_root", "resolve_data_path"]


def datasets_root() -> str:
    """``$PHRASEDET_DATASETS``, default ``./datasets`` (read at call time)."""
    return os.path.expanduser(os.environ.get("PHRASEDET_DATASETS", "datasets"))


def resolve_data_path(path: str, key: str) -> str:
    """The file or folder a config's data path ``path`` (the value of config key ``key``) names.

    ``~`` is expanded; an absolute path is returned as it is. A relative one is
    ``$PHRASEDET_DATASETS/<path>`` when that exists, else ``<path>`` relative to the working
    directory when that exists.

    Raises:
        FileNotFoundError: a relative path found in neither place, naming the key and both places.
    """
    path = os.path.expanduser(path)
    if os.path.isabs(path):
        return path
    under_root = os.path.join(datasets_root(), path)
    for candidate in (under_root, path):
        if os.path.exists(candidate):
            return candidate
    raise FileNotFoundError(
        f"{key} {path!r}: neither {os.path.abspath(under_root)!r} (under $PHRASEDET_DATASETS, currently "
        f"{datasets_root()!r}) nor {os.path.abspath(path)!r} (under the working directory) exists; docs/DATA.md"
    )
