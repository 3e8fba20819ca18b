"""Phrase-grounding records -> pointing records (one query per annotation), and the registered
pointing splits derived from the grounding splits."""
import os

import pytest
from detectron2.data import DatasetCatalog, MetadataCatalog
from detectron2.structures import BoxMode

from phrasedet.data.datasets import (
    POINTING_EVALUATOR_TYPE,
    pointing_records_from_grounding,
    register_grounding_pointing,
)

from .flickr_fixture import write_flickr_root


def _ann(phrase, bbox, **extra):
    return dict(phrase=phrase, bbox=bbox, bbox_mode=BoxMode.XYXY_ABS, category_id=0, boxes=[bbox], **extra)


GROUNDING = [
    {"file_name": "/im/1.jpg", "image_id": "1", "height": 50, "width": 60, "dataset": "flickr30k_entities",
     "captions": ["Two men near a tree ."], "annotations": [
         _ann("two men", [1, 2, 30, 40], phrase_raw="Two men"),
         _ann("tree", [40.5, 0, 60, 50]),  # no phrase_raw: the phrase is the text
     ], "unboxed_phrases": []},
    {"file_name": "/im/2.jpg", "image_id": "2", "height": 10, "width": 10, "dataset": "flickr30k_entities",
     "captions": [], "annotations": [], "unboxed_phrases": []},  # no annotation: left out
    {"file_name": "/im/3.jpg", "image_id": "3", "height": 20, "width": 30, "dataset": "referit",
     "annotations": [_ann("sky", [0, 0, 30, 5], phrase_raw="the SKY")]},
]


def _query(text, phrase, bbox, query_id):
    return {"text": text, "phrase": phrase, "bbox": bbox, "bbox_mode": BoxMode.XYXY_ABS, "query_id": query_id}


def test_every_annotation_becomes_a_query(caplog):
    with caplog.at_level("INFO"):
        records = pointing_records_from_grounding(GROUNDING, "hand records")
    assert records == [
        {"file_name": "/im/1.jpg", "image_id": "1", "height": 50, "width": 60, "dataset": "flickr30k_entities",
         "queries": [_query("Two men", "two men", [1.0, 2.0, 30.0, 40.0], "1#0"),
                     _query("tree", "tree", [40.5, 0.0, 60.0, 50.0], "1#1")]},
        {"file_name": "/im/3.jpg", "image_id": "3", "height": 20, "width": 30, "dataset": "referit",
         "queries": [_query("the SKY", "sky", [0.0, 0.0, 30.0, 5.0], "3#0")]},
    ]
    assert ("Pointing records from hand records: 2 images, 3 queries (one per annotation); 1 images without "
            "annotation left out.") in caplog.text


def test_repeated_image_id_and_other_box_modes_are_errors():
    with pytest.raises(ValueError, match="hand: image_id '1' appears twice"):
        pointing_records_from_grounding([GROUNDING[0], GROUNDING[0]], "hand")
    other = dict(GROUNDING[2], annotations=[dict(GROUNDING[2]["annotations"][0], bbox_mode=BoxMode.XYWH_ABS)])
    with pytest.raises(ValueError, match="hand: image_id '3' has boxes in .*expected XYXY_ABS"):
        pointing_records_from_grounding([other], "hand")


@pytest.mark.parametrize("pointing, grounding", [
    ("builtin_flickr30k_pointing_test", "builtin_flickr30k_entities_test"),
    ("builtin_referit_pointing_test", "builtin_referit_test"),
])
def test_builtin_pointing_splits_have_one_query_per_annotation(pointing, grounding):
    source = DatasetCatalog.get(grounding)
    records = DatasetCatalog.get(pointing)
    annotated = [r for r in source if r["annotations"]]
    assert [r["image_id"] for r in records] == [r["image_id"] for r in annotated]
    queries = [q for r in records for q in r["queries"]]
    annotations = [a for r in annotated for a in r["annotations"]]
    assert len(queries) == len(annotations) > 0
    assert [(q["text"], q["phrase"], q["bbox"]) for q in queries] == [
        (a["phrase_raw"], a["phrase"], a["bbox"]) for a in annotations
    ]
    assert len({q["query_id"] for q in queries}) == len(queries)
    meta = MetadataCatalog.get(pointing)
    assert (meta.evaluator_type, meta.source, meta.split, meta.builtin) == (POINTING_EVALUATOR_TYPE, grounding, "test", True)
    assert meta.dataset == MetadataCatalog.get(grounding).dataset


def test_real_flickr_pointing_reads_the_grounding_split(tmp_path, monkeypatch):
    root = str(tmp_path)
    write_flickr_root(root)
    monkeypatch.setenv("PHRASEDET_DATASETS", root)
    (record,) = DatasetCatalog.get("flickr30k_entities_pointing_train")
    (source,) = DatasetCatalog.get("flickr30k_entities_train")
    assert record["file_name"] == os.path.join(root, "flickr30k-images", "1000092795.jpg")
    assert [q["text"] for q in record["queries"]] == [a["phrase_raw"] for a in source["annotations"]]
    assert MetadataCatalog.get("referit_pointing_trainval").source == "referit_trainval"


def test_register_grounding_pointing_for_any_registered_split():
    name = f"test_grounding_for_pointing_{os.getpid()}"
    DatasetCatalog.register(name, lambda: GROUNDING[:1])
    MetadataCatalog.get(name).set(dataset="flickr30k_entities")
    register_grounding_pointing(f"{name}_pointing", name, split="test")
    assert [q["query_id"] for q in DatasetCatalog.get(f"{name}_pointing")[0]["queries"]] == ["1#0", "1#1"]
    meta = MetadataCatalog.get(f"{name}_pointing")
    assert (meta.evaluator_type, meta.dataset, meta.source, meta.split) == ("pointing", "flickr30k_entities", name, "test")
