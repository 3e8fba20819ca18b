"""``register_flickr30k_entities`` and ``register_referit``: put a split into Detectron2's catalogs."""
from detectron2.data import DatasetCatalog, MetadataCatalog

from .common import cached_load
from .flickr30k_entities import load_flickr30k_entities
from .referit import load_referit

__all__ = ["register_flickr30k_entities", "register_referit", "register_grounding_dataset", "EVALUATOR_TYPE"]

# MetadataCatalog evaluator_type of every phrase-grounding split (phrase mAP + localization).
EVALUATOR_TYPE = "phrase_detection"


def register_grounding_dataset(name, loader, metadata):
    """Register ``loader`` under ``name`` with ``evaluator_type`` and ``metadata`` in MetadataCatalog."""
    DatasetCatalog.register(name, loader)
    MetadataCatalog.get(name).set(evaluator_type=EVALUATOR_TYPE, **metadata)


def register_flickr30k_entities(
    name, ann_root, image_root, split_file, unrelated_captions_file=None, box_policy="error", **metadata
):
    """Register one Flickr30K Entities split; the files are read once, when the dataset is first used.

    Args:
        name: dataset name, e.g. ``"flickr30k_entities_train"``.
        ann_root, image_root, split_file, unrelated_captions_file, box_policy: see
            :func:`load_flickr30k_entities`.
        metadata: extra ``MetadataCatalog`` fields, e.g. ``train_dataset`` (the split whose
            counts define the zero/few/common buckets).
    """
    register_grounding_dataset(
        name,
        lambda: cached_load(load_flickr30k_entities, ann_root, image_root, split_file, unrelated_captions_file, box_policy),
        dict(dataset="flickr30k_entities", ann_root=ann_root, image_root=image_root,
             split_file=split_file, phrase_style="flickr", **metadata),
    )


def register_referit(name, refclef_root, image_root, split="train", split_by="berkeley", image_list=None,
                     box_policy="error", **metadata):
    """Register one ReferIt (refclef) split; arguments as in :func:`load_referit`."""
    register_grounding_dataset(
        name,
        lambda: cached_load(load_referit, refclef_root, image_root, split, split_by, image_list, box_policy),
        dict(dataset="referit", refclef_root=refclef_root, image_root=image_root, split=split,
             split_by=split_by, image_list=image_list, phrase_style="referit", **metadata),
    )
