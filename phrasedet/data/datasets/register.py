"""``register_flickr30k_entities``, ``register_referit``, the caption-dataset and the pointing-game
registrations: put a split into Detectron2's catalogs."""
from detectron2.data import DatasetCatalog, MetadataCatalog

from .coco_captions import load_coco_karpathy
from .common import cached_load
from .flickr30k_captions import load_flickr30k_entities_captions
from .flickr30k_entities import load_flickr30k_entities
from .pointing import pointing_records_from_grounding
from .referit import load_referit
from .visual_genome import load_visual_genome_pointing
from .vsepp_precomp import load_vsepp_precomp

__all__ = [
    "register_flickr30k_entities", "register_referit", "register_grounding_dataset", "EVALUATOR_TYPE",
    "register_caption_dataset", "register_flickr30k_captions", "register_coco_karpathy", "register_vsepp_precomp",
    "RETRIEVAL_EVALUATOR_TYPE", "POINTING_EVALUATOR_TYPE", "register_pointing_dataset",
    "register_visual_genome_pointing", "register_grounding_pointing", "IMAGE_LABELS_EVALUATOR_TYPE",
    "register_image_labels_dataset", "DETECTION_EVALUATOR_TYPE", "register_detection_dataset",
]

# MetadataCatalog evaluator_type of every phrase-grounding split (phrase mAP + localization).
EVALUATOR_TYPE = "phrase_detection"
# MetadataCatalog evaluator_type of every caption split (image-sentence retrieval).
RETRIEVAL_EVALUATOR_TYPE = "retrieval"
# MetadataCatalog evaluator_type of every pointing-game split (records with "queries").
POINTING_EVALUATOR_TYPE = "pointing"
# MetadataCatalog evaluator_type of every image-labels split (the built-in pretraining split: multi-label classification).
IMAGE_LABELS_EVALUATOR_TYPE = "image_labels"
# MetadataCatalog evaluator_type of every object-detection split (Detectron2's own: COCO box AP).
DETECTION_EVALUATOR_TYPE = "coco"


def _register(name, loader, evaluator_type, metadata):
    """``loader`` in DatasetCatalog under ``name``; ``evaluator_type`` (the task family) and ``metadata`` in MetadataCatalog."""
    DatasetCatalog.register(name, loader)
    MetadataCatalog.get(name).set(evaluator_type=evaluator_type, **metadata)


def register_grounding_dataset(name, loader, metadata):
    """Register ``loader`` under ``name`` with ``evaluator_type`` and ``metadata`` in MetadataCatalog."""
    _register(name, loader, EVALUATOR_TYPE, metadata)


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


def register_caption_dataset(name, loader, metadata):
    """Register a caption (retrieval) split: ``loader`` in DatasetCatalog, ``metadata`` and
    ``evaluator_type="retrieval"`` in MetadataCatalog."""
    _register(name, loader, RETRIEVAL_EVALUATOR_TYPE, metadata)


def register_flickr30k_captions(name, ann_root, image_root, split_file, unrelated_captions_file=None,
                                drop_unrelated=False, **metadata):
    """Register one split of Flickr30K captions from Flickr30K Entities ``Sentences/``; arguments
    as in :func:`load_flickr30k_entities_captions`, ``metadata`` as in
    :func:`register_flickr30k_entities`."""
    register_caption_dataset(
        name,
        lambda: cached_load(load_flickr30k_entities_captions, ann_root, image_root, split_file,
                            unrelated_captions_file, drop_unrelated),
        dict(dataset="flickr30k", ann_root=ann_root, image_root=image_root, split_file=split_file, **metadata),
    )


def register_coco_karpathy(name, karpathy_json, image_root, split, captions_files=(), max_captions=5,
                           restval_to_train=True, **metadata):
    """Register one split of COCO on Karpathy's split; arguments as in :func:`load_coco_karpathy`."""
    captions_files = tuple(captions_files)
    register_caption_dataset(
        name,
        lambda: cached_load(load_coco_karpathy, karpathy_json, image_root, split, captions_files, max_captions,
                            restval_to_train),
        dict(dataset="coco", karpathy_json=karpathy_json, image_root=image_root, split=split,
             captions_files=captions_files, max_captions=max_captions, **metadata),
    )


def register_vsepp_precomp(name, data_dir, split, **metadata):
    """Register one split of a VSE++ precomputed-feature folder; arguments as in :func:`load_vsepp_precomp`."""
    register_caption_dataset(
        name,
        lambda: cached_load(load_vsepp_precomp, data_dir, split),
        dict(dataset="vsepp_precomp", data_dir=data_dir, split=split, **metadata),
    )


def register_pointing_dataset(name, loader, metadata):
    """Register a pointing-game split: ``loader`` (returning pointing records, :mod:`.pointing`) in
    DatasetCatalog, ``metadata`` and ``evaluator_type="pointing"`` in MetadataCatalog."""
    _register(name, loader, POINTING_EVALUATOR_TYPE, metadata)


def register_visual_genome_pointing(name, region_descriptions_json, image_data_json, image_root, coco_images_json,
                                    exclude_karpathy_json=None, exclude_splits=("train", "restval"),
                                    min_phrase_chars=3, box_policy="clip", check_images=True, **metadata):
    """Register Visual Genome's pointing-game split; arguments as in :func:`load_visual_genome_pointing`."""
    exclude_splits = tuple(exclude_splits)
    register_pointing_dataset(
        name,
        lambda: cached_load(load_visual_genome_pointing, region_descriptions_json, image_data_json, image_root,
                            coco_images_json, exclude_karpathy_json, exclude_splits, min_phrase_chars, box_policy,
                            check_images),
        dict(dataset="visual_genome", region_descriptions_json=region_descriptions_json,
             image_data_json=image_data_json, image_root=image_root, coco_images_json=coco_images_json,
             exclude_karpathy_json=exclude_karpathy_json,
             exclude_karpathy_splits=exclude_splits if exclude_karpathy_json else (),
             **metadata),
    )


def register_grounding_pointing(name, grounding_name, **metadata):
    """Register the pointing records of the registered phrase-grounding split ``grounding_name``
    (:func:`pointing_records_from_grounding`: one query per annotation), read when first used.
    Metadata: ``source=grounding_name``, the grounding split's ``dataset`` (unless ``metadata``
    gives one) and ``metadata``."""
    meta = dict(source=grounding_name, **metadata)
    if "dataset" not in meta and grounding_name in MetadataCatalog:
        meta["dataset"] = MetadataCatalog.get(grounding_name).get("dataset", None)
    register_pointing_dataset(
        name, lambda: pointing_records_from_grounding(DatasetCatalog.get(grounding_name), grounding_name), meta
    )


def register_image_labels_dataset(name, loader, metadata):
    """Register an image-labels split (records an ``ImageLabelsMapper`` reads) with
    ``evaluator_type="image_labels"``."""
    _register(name, loader, IMAGE_LABELS_EVALUATOR_TYPE, metadata)


def register_detection_dataset(name, loader, metadata):
    """Register an object-detection split (Detectron2 standard dicts with ``annotations`` of
    ``category_id`` < ``len(metadata["thing_classes"])``) with Detectron2's
    ``evaluator_type="coco"``: ``DetectionDatasetMapper`` reads it, ``COCOEvaluator`` scores it."""
    if not metadata.get("thing_classes"):
        raise ValueError(f"detection split {name!r}: its metadata must name its thing_classes")
    _register(name, loader, DETECTION_EVALUATOR_TYPE, metadata)
