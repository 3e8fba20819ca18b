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
  (default ``~/.cache/phrasedet``);
- ``builtin_longtail_*``: every built-in name below (grounding, captions, pointing) again, for the
  same scenes written in the long-tailed language (:mod:`phrasedet.data.synthetic.language`;
  metadata ``language="long_tail"``, version 3's names ``language="v3"``).

Caption datasets for image-sentence retrieval (``evaluator_type="retrieval"``):

- ``flickr30k_entities_captions_{train,val,test}``: Flickr30K Entities ``Sentences/`` with the
  same split lists as ``flickr30k_entities_*``;
- ``flickr30k_karpathy_{train,val,test}``: ``flickr30k/dataset_flickr30k.json``, images in
  ``flickr30k-images/``;
- ``flickr30k_token_{train,val,test}``: ``flickr30k/results_20130124.token`` with the Flickr30K
  Entities split lists;
- ``coco_karpathy_{train,val,test}``: ``coco/dataset_coco.json`` (train includes restval),
  captions from ``coco/annotations/captions_{train,val}2014.json`` when both are present (else
  the Karpathy file's own), images in ``coco/{train,val}2014/``;
- ``vsepp_f30k_precomp_{train,dev,test}`` and ``vsepp_coco_precomp_{train,dev,test,testall}``:
  VSE++'s ``data/f30k_precomp`` and ``data/coco_precomp``;
- ``builtin_flickr30k_captions_{train,val,test}``: the built-in dataset's captions.

Pointing-game splits (``evaluator_type="pointing"``, records with ``queries``, docs/DATA.md):

- ``visual_genome_pointing``: ``visual_genome/{region_descriptions,image_data}.json``, images in
  ``visual_genome/VG_100K{,_2}/``, the VG images in COCO val2014 (ids from
  ``coco/annotations/captions_val2014.json``, else ``instances_val2014.json``): the paper's 17,471;
- ``visual_genome_pointing_unseen``: the same without the images of Karpathy's ``train`` and
  ``restval`` splits (``coco/dataset_coco.json``), which the retrieval models train on;
- ``flickr30k_entities_pointing_{train,val,test}``, ``referit_pointing_{train,val,trainval,test}``
  and ``builtin_{flickr30k,referit}_pointing_{train,val,test}``: one query per annotation of the
  grounding split named in their ``source`` metadata.

Image-labels splits (``evaluator_type="image_labels"``): ``builtin_pretraining_{train,val}``
(100,000 and 1,000 images), the built-in stand-in for ImageNet
(:mod:`phrasedet.data.synthetic.pretraining`): images drawn on demand, never the benchmark's.

Detection splits (Detectron2's ``evaluator_type="coco"``): ``builtin_pretraining_detection_{train,val}``,
the same images with a box and one of 48 (colour, shape) classes per object, the built-in
stand-in for COCO (:mod:`.pretraining_detection`; boxes computed once into ``$PHRASEDET_CACHE``).
"""
import functools
import os

from phrasedet.paths import datasets_root

from .coco_captions import load_coco_karpathy
from .common import cached_load
from .flickr30k_captions import (
    load_flickr30k_entities_captions,
    load_flickr30k_karpathy,
    load_flickr30k_token_captions,
)
from .flickr30k_entities import load_flickr30k_entities
from .pretraining_detection import load_pretraining_detection
from .referit import load_referit
from .register import (
    register_caption_dataset,
    register_grounding_dataset,
    register_grounding_pointing,
    register_detection_dataset,
    register_image_labels_dataset,
    register_pointing_dataset,
)
from .visual_genome import load_visual_genome_pointing
from .vsepp_precomp import load_vsepp_precomp

__all__ = ["datasets_root", "register_all_builtin", "builtin_dataset_root", "builtin_language_of", "builtin_name",
           "BUILTIN_LANGUAGES"]

_SPLITS_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "splits")
FLICKR_SPLITS = ("train", "val", "test")
REFERIT_HU_SPLITS = ("train", "val", "trainval", "test")
REFERIT_UNC_SPLITS = ("train", "val", "testA", "testB")
VSEPP_SPLITS = {"f30k": ("train", "dev", "test"), "coco": ("train", "dev", "test", "testall")}
# Karpathy splits the retrieval models train on (rVal): left out of visual_genome_pointing_unseen.
RVAL_TRAIN_SPLITS = ("train", "restval")


def _in_root_or_shipped(root_file, shipped_file):
    return root_file if os.path.isfile(root_file) else shipped_file


def _require_root(path, what):
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"{what} not found at {path!r}. Set PHRASEDET_DATASETS to the folder that holds it "
            f"(currently {datasets_root()!r}); layout in docs/DATA.md."
        )


def _flickr_list(name):
    """A Flickr30K Entities list file (``train.txt``, ``UNRELATED_CAPTIONS``): the root's, else the shipped copy."""
    ann_root = os.path.join(datasets_root(), "flickr30k_entities")
    return _in_root_or_shipped(os.path.join(ann_root, name), os.path.join(_SPLITS_DIR, "flickr30k_entities", name))


def _real_flickr_files(split):
    """(ann_root, image_root, split list, UNRELATED_CAPTIONS) of real Flickr30K Entities."""
    ann_root = os.path.join(datasets_root(), "flickr30k_entities")
    _require_root(ann_root, "Flickr30K Entities")
    images = os.path.join(datasets_root(), "flickr30k-images")
    return ann_root, images, _flickr_list(f"{split}.txt"), _flickr_list("UNRELATED_CAPTIONS")


def _real_flickr(split):
    return cached_load(load_flickr30k_entities, *_real_flickr_files(split))


def _real_flickr_captions(split):
    return cached_load(load_flickr30k_entities_captions, *_real_flickr_files(split))


def _flickr30k_root():
    root = os.path.join(datasets_root(), "flickr30k")
    _require_root(root, "Flickr30K (dataset_flickr30k.json, results_20130124.token)")
    return root


def _real_flickr_karpathy(split):
    return cached_load(load_flickr30k_karpathy, os.path.join(_flickr30k_root(), "dataset_flickr30k.json"),
                       os.path.join(datasets_root(), "flickr30k-images"), split)


def _real_flickr_token(split):
    return cached_load(load_flickr30k_token_captions, os.path.join(_flickr30k_root(), "results_20130124.token"),
                       os.path.join(datasets_root(), "flickr30k-images"), _flickr_list(f"{split}.txt"))


def _real_coco_karpathy(split):
    root = os.path.join(datasets_root(), "coco")
    _require_root(root, "COCO (dataset_coco.json)")
    official = tuple(os.path.join(root, "annotations", f"captions_{part}2014.json") for part in ("train", "val"))
    captions_files = official if all(os.path.isfile(f) for f in official) else ()
    return cached_load(load_coco_karpathy, os.path.join(root, "dataset_coco.json"), root, split, captions_files)


def _real_vsepp(collection, split):
    data_dir = os.path.join(datasets_root(), "data", f"{collection}_precomp")
    _require_root(data_dir, f"VSE++ precomputed features ({collection}_precomp)")
    return cached_load(load_vsepp_precomp, data_dir, split)


def _real_referit(split, split_by, use_hu_list):
    refclef = os.path.join(datasets_root(), "refclef")
    _require_root(refclef, "ReferIt (refclef)")
    image_list = os.path.join(_SPLITS_DIR, "referit", f"referit_{split}_imlist.txt") if use_hu_list else None
    return cached_load(load_referit, refclef, os.path.join(datasets_root(), "images", "saiapr_tc-12"), split, split_by, image_list)


def _coco_val2014_images_json(coco_root):
    """``annotations/captions_val2014.json``, else ``instances_val2014.json`` when only that exists."""
    captions, instances = (os.path.join(coco_root, "annotations", f"{kind}_val2014.json")
                           for kind in ("captions", "instances"))
    return instances if not os.path.isfile(captions) and os.path.isfile(instances) else captions


def _real_visual_genome(exclude_rval_train):
    root = os.path.join(datasets_root(), "visual_genome")
    _require_root(root, "Visual Genome (region_descriptions.json, image_data.json, VG_100K*/)")
    coco = os.path.join(datasets_root(), "coco")
    karpathy = os.path.join(coco, "dataset_coco.json") if exclude_rval_train else None
    return cached_load(load_visual_genome_pointing, os.path.join(root, "region_descriptions.json"),
                       os.path.join(root, "image_data.json"), root, _coco_val2014_images_json(coco), karpathy,
                       RVAL_TRAIN_SPLITS)


#: Name prefix after ``builtin_`` -> the language of the built-in dataset it names.
BUILTIN_LANGUAGES = {"": "v3", "longtail_": "long_tail"}


def builtin_dataset_root(language="v3"):
    """Root of the built-in synthetic dataset written in ``language``, generating it on first use."""
    from phrasedet.data.synthetic import ensure_builtin_dataset

    return ensure_builtin_dataset(language=language)


def builtin_name(name, language="v3"):
    """The registered built-in split ``name`` (``"flickr30k_entities_val"``) in ``language``:
    ``builtin_flickr30k_entities_val`` (v3), ``builtin_longtail_flickr30k_entities_val`` (long_tail)."""
    prefixes = {lang: prefix for prefix, lang in BUILTIN_LANGUAGES.items()}
    if language not in prefixes:
        raise KeyError(f"no built-in language {language!r} (known: {', '.join(prefixes)})")
    return f"builtin_{prefixes[language]}{name}"


def builtin_language_of(dataset_name):
    """The language (``v3``, ``long_tail``) of a registered built-in split; None for another split."""
    from detectron2.data import MetadataCatalog

    meta = MetadataCatalog.get(dataset_name)
    return meta.get("language", None) if meta.get("builtin", False) else None


def _builtin_flickr_files(split, language="v3"):
    """(ann_root, image_root, split list, UNRELATED_CAPTIONS) of the built-in dataset."""
    root = builtin_dataset_root(language)
    ann_root = os.path.join(root, "flickr30k_entities")
    images = os.path.join(root, "flickr30k-images")
    return ann_root, images, os.path.join(ann_root, f"{split}.txt"), os.path.join(ann_root, "UNRELATED_CAPTIONS")


def _builtin_flickr(split, language="v3"):
    return cached_load(load_flickr30k_entities, *_builtin_flickr_files(split, language))


def _builtin_flickr_captions(split, language="v3"):
    return cached_load(load_flickr30k_entities_captions, *_builtin_flickr_files(split, language))


def _builtin_referit(split, language="v3"):
    root = builtin_dataset_root(language)
    return cached_load(load_referit, os.path.join(root, "refclef"), os.path.join(root, "images", "saiapr_tc-12"), split)


def _meta(dataset, style, train_name, **extra):
    return dict(dataset=dataset, phrase_style=style, train_dataset=train_name, **extra)


def register_all_builtin():
    """Register every builtin name (idempotent at import: each name is registered once)."""
    p = functools.partial
    for split in FLICKR_SPLITS:
        register_grounding_dataset(f"flickr30k_entities_{split}", p(_real_flickr, split),
                  _meta("flickr30k_entities", "flickr", "flickr30k_entities_train", split=split))
        for prefix, language in BUILTIN_LANGUAGES.items():
            register_grounding_dataset(f"builtin_{prefix}flickr30k_entities_{split}", p(_builtin_flickr, split, language),
                      _meta("flickr30k_entities", "flickr", f"builtin_{prefix}flickr30k_entities_train", split=split,
                            builtin=True, language=language))
            register_grounding_dataset(f"builtin_{prefix}referit_{split}", p(_builtin_referit, split, language),
                      _meta("referit", "referit", f"builtin_{prefix}referit_train", split=split, builtin=True,
                            language=language))
    for split in REFERIT_HU_SPLITS:
        register_grounding_dataset(f"referit_{split}", p(_real_referit, split, "berkeley", True),
                  _meta("referit", "referit", "referit_trainval", split=split, split_by="berkeley"))
    for split in REFERIT_UNC_SPLITS:
        register_grounding_dataset(f"referit_unc_{split}", p(_real_referit, split, "unc", False),
                  _meta("referit", "referit", "referit_unc_train", split=split, split_by="unc"))
    _register_caption_builtins()
    _register_pointing_builtins()
    _register_pretraining_builtins()


def _register_caption_builtins():
    """The caption (retrieval) names; nothing is read until a dataset is first used."""
    p = functools.partial
    for split in FLICKR_SPLITS:
        for prefix, language in BUILTIN_LANGUAGES.items():
            register_caption_dataset(f"builtin_{prefix}flickr30k_captions_{split}", p(_builtin_flickr_captions, split, language),
                                     dict(dataset="flickr30k", split=split, source="flickr30k_entities", builtin=True,
                                          language=language))
        register_caption_dataset(f"flickr30k_entities_captions_{split}", p(_real_flickr_captions, split),
                                 dict(dataset="flickr30k", split=split, source="flickr30k_entities"))
        register_caption_dataset(f"flickr30k_karpathy_{split}", p(_real_flickr_karpathy, split),
                                 dict(dataset="flickr30k", split=split, source="karpathy"))
        register_caption_dataset(f"flickr30k_token_{split}", p(_real_flickr_token, split),
                                 dict(dataset="flickr30k", split=split, source="token"))
        register_caption_dataset(f"coco_karpathy_{split}", p(_real_coco_karpathy, split),
                                 dict(dataset="coco", split=split, source="karpathy"))
    for collection, splits in VSEPP_SPLITS.items():
        for split in splits:
            register_caption_dataset(f"vsepp_{collection}_precomp_{split}", p(_real_vsepp, collection, split),
                                     dict(dataset="vsepp_precomp", split=split, collection=collection))


def _register_pointing_builtins():
    """The pointing-game names; nothing is read until a dataset is first used."""
    for split in FLICKR_SPLITS:
        for prefix, language in BUILTIN_LANGUAGES.items():
            register_grounding_pointing(f"builtin_{prefix}flickr30k_pointing_{split}",
                                        f"builtin_{prefix}flickr30k_entities_{split}", split=split, builtin=True,
                                        language=language)
            register_grounding_pointing(f"builtin_{prefix}referit_pointing_{split}", f"builtin_{prefix}referit_{split}",
                                        split=split, builtin=True, language=language)
        register_grounding_pointing(f"flickr30k_entities_pointing_{split}", f"flickr30k_entities_{split}", split=split)
    for split in REFERIT_HU_SPLITS:
        register_grounding_pointing(f"referit_pointing_{split}", f"referit_{split}", split=split)
    for name, unseen in (("visual_genome_pointing", False), ("visual_genome_pointing_unseen", True)):
        register_pointing_dataset(name, functools.partial(_real_visual_genome, unseen),
                                  dict(dataset="visual_genome", split="coco_val2014",
                                       exclude_karpathy_splits=RVAL_TRAIN_SPLITS if unseen else ()))


#: Images of the built-in pretraining splits.
PRETRAINING_SIZES = {"train": 100_000, "val": 1_000}


def _pretraining_records(split):
    from phrasedet.data.synthetic.pretraining import pretraining_records

    return pretraining_records(split, PRETRAINING_SIZES[split])


def _pretraining_detection(split):
    return cached_load(load_pretraining_detection, split, PRETRAINING_SIZES[split])


def _register_pretraining_builtins():
    """The image-labels and detection names of the pretraining split (records made on first use,
    images drawn when read)."""
    from phrasedet.data.synthetic.pretraining import DETECTION_CLASSES

    for split in PRETRAINING_SIZES:
        register_image_labels_dataset(f"builtin_pretraining_{split}", functools.partial(_pretraining_records, split),
                                      dict(dataset="builtin_pretraining", split=split, builtin=True))
        register_detection_dataset(f"builtin_pretraining_detection_{split}", functools.partial(_pretraining_detection, split),
                                   dict(dataset="builtin_pretraining", split=split, builtin=True,
                                        thing_classes=list(DETECTION_CLASSES)))
