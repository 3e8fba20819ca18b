"""Builtin dataset names, registered when ``phrasedet`` is imported.

Real data live under ``$PHRASEDET_DATASETS`` (default ``./datasets``), laid out as the releases
unpack (docs/DATA.md):

- ``flickr30k_entities_{train,val,test}``: ``flickr30k_entities/{Sentences,Annotations}`` and
  ``flickr30k-images/``; split lists and ``UNRELATED_CAPTIONS`` from the root when present, else
  the copies shipped in ``phrasedet/data/splits``;
- ``referit_{train,val,trainval,test}``: ``refclef/refs(berkeley).p`` + ``instances.json`` and
  ``images/saiapr_tc-12/``, images chosen by Hu et al.'s lists (shipped);
- ``referit_unc_{train,val,testA,testB}``: the same with ``refs(unc).p`` and its split field;
- ``builtin_flickr30k_entities_{train,val,test}`` and ``builtin_referit_{train,val,test}``: the
  built-in synthetic dataset in both formats, generated on first use into ``$PHRASEDET_CACHE``
  (default ``~/.cache/phrasedet``).
"""
import functools
import os

from .common import cached_load
from .flickr30k_entities import load_flickr30k_entities
from .referit import load_referit
from .register import register_grounding_dataset

__all__ = ["datasets_root", "register_all_builtin", "builtin_dataset_root"]

_SPLITS_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "splits")
FLICKR_SPLITS = ("train", "val", "test")
REFERIT_HU_SPLITS = ("train", "val", "trainval", "test")
REFERIT_UNC_SPLITS = ("train", "val", "testA", "testB")


def datasets_root():
    """``$PHRASEDET_DATASETS``, default ``./datasets`` (read at call time)."""
    return os.path.expanduser(os.environ.get("PHRASEDET_DATASETS", "datasets"))


def _in_root_or_shipped(root_file, shipped_file):
    return root_file if os.path.isfile(root_file) else shipped_file


def _require_root(path, what):
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"{what} not found at {path!r}. Set PHRASEDET_DATASETS to the folder that holds it "
            f"(currently {datasets_root()!r}); layout in docs/DATA.md."
        )


def _real_flickr(split):
    ann_root = os.path.join(datasets_root(), "flickr30k_entities")
    _require_root(ann_root, "Flickr30K Entities")
    shipped = os.path.join(_SPLITS_DIR, "flickr30k_entities")
    return cached_load(
        load_flickr30k_entities,
        ann_root,
        os.path.join(datasets_root(), "flickr30k-images"),
        _in_root_or_shipped(os.path.join(ann_root, f"{split}.txt"), os.path.join(shipped, f"{split}.txt")),
        _in_root_or_shipped(os.path.join(ann_root, "UNRELATED_CAPTIONS"), os.path.join(shipped, "UNRELATED_CAPTIONS")),
    )


def _real_referit(split, split_by, use_hu_list):
    refclef = os.path.join(datasets_root(), "refclef")
    _require_root(refclef, "ReferIt (refclef)")
    image_list = os.path.join(_SPLITS_DIR, "referit", f"referit_{split}_imlist.txt") if use_hu_list else None
    return cached_load(load_referit, refclef, os.path.join(datasets_root(), "images", "saiapr_tc-12"), split, split_by, image_list)


def builtin_dataset_root():
    """Root of the built-in synthetic dataset, generating it on first use."""
    from phrasedet.data.synthetic import ensure_builtin_dataset

    return ensure_builtin_dataset()


def _builtin_flickr(split):
    root = builtin_dataset_root()
    ann_root = os.path.join(root, "flickr30k_entities")
    return cached_load(
        load_flickr30k_entities, ann_root, os.path.join(root, "flickr30k-images"), os.path.join(ann_root, f"{split}.txt"),
        os.path.join(ann_root, "UNRELATED_CAPTIONS"),
    )


def _builtin_referit(split):
    root = builtin_dataset_root()
    return cached_load(load_referit, os.path.join(root, "refclef"), os.path.join(root, "images", "saiapr_tc-12"), split)


def _meta(dataset, style, train_name, **extra):
    return dict(dataset=dataset, phrase_style=style, train_dataset=train_name, **extra)


def register_all_builtin():
    """Register every builtin name (idempotent at import: each name is registered once)."""
    p = functools.partial
    for split in FLICKR_SPLITS:
        register_grounding_dataset(f"flickr30k_entities_{split}", p(_real_flickr, split),
                  _meta("flickr30k_entities", "flickr", "flickr30k_entities_train", split=split))
        register_grounding_dataset(f"builtin_flickr30k_entities_{split}", p(_builtin_flickr, split),
                  _meta("flickr30k_entities", "flickr", "builtin_flickr30k_entities_train", split=split, builtin=True))
        register_grounding_dataset(f"builtin_referit_{split}", p(_builtin_referit, split),
                  _meta("referit", "referit", "builtin_referit_train", split=split, builtin=True))
    for split in REFERIT_HU_SPLITS:
        register_grounding_dataset(f"referit_{split}", p(_real_referit, split, "berkeley", True),
                  _meta("referit", "referit", "referit_trainval", split=split, split_by="berkeley"))
    for split in REFERIT_UNC_SPLITS:
        register_grounding_dataset(f"referit_unc_{split}", p(_real_referit, split, "unc", False),
                  _meta("referit", "referit", "referit_unc_train", split=split, split_by="unc"))
