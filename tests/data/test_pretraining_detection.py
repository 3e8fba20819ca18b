"""The built-in pretraining split as a detection dataset and its mapper
(phrasedet/data/datasets/pretraining_detection.py, phrasedet/data/detection_mapper.py): the
records' boxes are those of the images their keys draw, the classes are the colour-shape combos,
the boxes follow the resize, and the trainer reads and scores these splits as Detectron2 does."""
import os

import numpy as np
import pytest
import torch
from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog, MetadataCatalog
from detectron2.data import transforms as T
from detectron2.structures import BoxMode
from PIL import Image

from phrasedet.config import add_phrasedet_config
from phrasedet.data import DetectionDatasetMapper
from phrasedet.data.datasets import load_pretraining_detection, register_detection_dataset
from phrasedet.data.datasets import pretraining_detection
from phrasedet.data.synthetic.pretraining import DETECTION_CLASSES, draw_pretraining_image, pretraining_records
from phrasedet.data.synthetic.scene import ALL_COMBOS

DETECTOR = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pretraining", "builtin_detector.yaml")


def _cfg(*opts):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(DETECTOR)
    cfg.merge_from_list(list(opts))
    return cfg


@pytest.mark.parametrize("split,n", [("val", 300), ("train", 100)])
def test_the_boxes_and_classes_of_the_records_are_those_of_the_drawn_images(tmp_path, split, n):
    records = load_pretraining_detection(split, n, cache_dir=str(tmp_path))
    keys = pretraining_records(split, n)  # the same images as the image-labels split
    assert [(r["image_id"], r["render_key"]) for r in records] == [(k["image_id"], k["render_key"]) for k in keys]
    sizes = set()
    for record in records:
        image, truth = draw_pretraining_image(record)
        assert (record["width"], record["height"]) == image.size and record["file_name"] == record["image_id"]
        assert [a["bbox"] for a in record["annotations"]] == [o["box"] for o in truth["objects"]]
        assert [DETECTION_CLASSES[a["category_id"]] for a in record["annotations"]] == \
            [f"{o['colour']} {o['shape']}" for o in truth["objects"]]
        assert all(a["bbox_mode"] == BoxMode.XYXY_ABS for a in record["annotations"])
        sizes.add(image.size)
    assert sizes == {(128, 96), (96, 128), (128, 128)}  # every image size of the scene model was checked


def test_the_boxes_are_computed_once_into_the_cache(tmp_path, monkeypatch):
    first = load_pretraining_detection("val", 20, cache_dir=str(tmp_path))
    folder = pretraining_detection.pretraining_boxes_dir("val", 20, cache_dir=str(tmp_path))
    assert os.path.basename(folder) == "builtin-pretraining-boxes-v3-seed0-val-n20"
    assert sorted(os.listdir(folder)) == ["boxes.npz"]  # made whole: no temporary folder left beside it
    assert sorted(os.listdir(tmp_path)) == [f".{os.path.basename(folder)}.lock", os.path.basename(folder)]

    def not_again(record):
        raise AssertionError("the boxes were computed again")

    monkeypatch.setattr("phrasedet.data.synthetic.pretraining.pretraining_truth", not_again)
    assert load_pretraining_detection("val", 20, cache_dir=str(tmp_path)) == first
    with pytest.raises(AssertionError, match="computed again"):  # another size is another table
        load_pretraining_detection("val", 21, cache_dir=str(tmp_path))


def test_the_registered_splits_have_the_48_colour_shape_classes():
    assert list(DETECTION_CLASSES) == [f"{c} {s}" for c, s in ALL_COMBOS] and len(DETECTION_CLASSES) == 48
    assert DETECTION_CLASSES[:2] == ("red circle", "red square")
    for split in ("train", "val"):
        meta = MetadataCatalog.get(f"builtin_pretraining_detection_{split}")
        assert meta.evaluator_type == "coco" and meta.thing_classes == list(DETECTION_CLASSES)
    val = DatasetCatalog.get("builtin_pretraining_detection_val")
    assert len(val) == 1000 and val[:5] == load_pretraining_detection("val", 5)
    assert {a["category_id"] for r in val for a in r["annotations"]} == set(range(48))  # every combination in play
    with pytest.raises(ValueError, match="detection split 'x': its metadata must name its thing_classes"):
        register_detection_dataset("x", list, {})


def _record(width, height):
    return next(r for r in load_pretraining_detection("val", 40) if (r["width"], r["height"]) == (width, height))


@pytest.mark.parametrize("size,resized", [((128, 96), (160, 120)), ((96, 128), (120, 160)), ((128, 128), (128, 128))])
def test_the_mapper_resizes_as_the_phrase_detector_and_the_boxes_follow(size, resized):
    record = _record(*size)
    out = DetectionDatasetMapper(_cfg(), is_train=True)(record)
    scale = resized[0] / size[0]  # shortest edge 128, longest at most 160
    assert tuple(out["image"].shape) == (3, resized[1], resized[0]) and out["image"].dtype == torch.uint8
    boxes = torch.tensor([a["bbox"] for a in record["annotations"]]) * scale
    assert torch.allclose(out["instances"].gt_boxes.tensor, boxes)
    assert out["instances"].gt_classes.tolist() == [a["category_id"] for a in record["annotations"]]
    assert out["instances"].image_size == (resized[1], resized[0])
    bgr = np.asarray(draw_pretraining_image(record)[0])[:, :, ::-1].copy()  # INPUT.FORMAT BGR
    expected = T.ResizeShortestEdge(128, 160).get_transform(bgr).apply_image(bgr).transpose(2, 0, 1)
    assert np.array_equal(out["image"].numpy(), expected)
    test = DetectionDatasetMapper(_cfg(), is_train=False)(record)
    assert torch.equal(test["image"], out["image"]) and "instances" not in test and "annotations" not in test
    assert record["annotations"] and "image" not in record  # the record itself is left as it was


def test_the_mapper_refuses_annotations_that_are_not_the_drawn_objects():
    record = _record(128, 128)
    stale = {**record, "annotations": [dict(a) for a in record["annotations"]]}
    stale["annotations"][0]["bbox"] = [b + 1 for b in stale["annotations"][0]["bbox"]]
    with pytest.raises(ValueError, match=r"image 'pretrain_val_\d+': its record's annotations .* are not the objects its "
                                         r"render_key draws"):
        DetectionDatasetMapper(_cfg(), is_train=True)(stale)


def test_a_record_with_an_image_file_is_read_as_detectron2_reads_it(tmp_path):
    path = str(tmp_path / "a.png")
    Image.new("RGB", (96, 128), (10, 20, 30)).save(path)
    record = {"file_name": path, "image_id": "a", "width": 96, "height": 128,
              "annotations": [{"bbox": [8.0, 8.0, 40.0, 48.0], "bbox_mode": BoxMode.XYXY_ABS, "category_id": 3}]}
    out = DetectionDatasetMapper(_cfg(), is_train=True)(record)
    assert tuple(out["image"].shape) == (3, 160, 120) and out["image"][:, 0, 0].tolist() == [30, 20, 10]
    assert out["instances"].gt_boxes.tensor.tolist() == [[10.0, 10.0, 50.0, 60.0]]


def test_the_trainer_reads_and_scores_the_splits_as_detection(tmp_path):
    from detectron2.evaluation import COCOEvaluator

    from phrasedet.engine import PhrasedetTrainer, dataset_task

    cfg = _cfg("DATALOADER.NUM_WORKERS", 0)
    assert dataset_task("builtin_pretraining_detection_train") == dataset_task("builtin_pretraining_detection_val") == "coco"
    loader = iter(PhrasedetTrainer.build_test_loader(cfg, "builtin_pretraining_detection_val"))
    records = DatasetCatalog.get("builtin_pretraining_detection_val")[:2]
    assert [(r["width"], r["height"]) for r in records] == [(128, 128), (128, 96)]  # a square image and another
    for record, (x,) in zip(records, loader):
        assert torch.equal(x["image"], DetectionDatasetMapper(cfg, is_train=False)(record)["image"]), record["image_id"]
    evaluator = PhrasedetTrainer.build_evaluator(cfg, "builtin_pretraining_detection_val", output_folder=str(tmp_path))
    assert isinstance(evaluator, COCOEvaluator) and evaluator._tasks == ("bbox",)
    assert len(evaluator._coco_api.getImgIds()) == 1000 and len(evaluator._coco_api.getCatIds()) == 48
