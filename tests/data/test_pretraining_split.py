"""The built-in pretraining split (the stand-in for ImageNet) and its mapper
(phrasedet/data/synthetic/pretraining.py, phrasedet/data/label_mapper.py)."""
import io
from collections import Counter

import numpy as np
import pytest
import torch
from detectron2.data import DatasetCatalog, MetadataCatalog
from PIL import Image

from phrasedet.data import ImageLabelsMapper
from phrasedet.data.synthetic.labels import PRETRAINING_GROUPS, label_names, scene_labels
from phrasedet.data.synthetic.pretraining import STREAM, _planned_scene, pretraining_records, pretraining_truth, render_pretraining_image
from phrasedet.data.synthetic.scene import JPEG_QUALITY, render_scene


def test_records_are_keyed_apart_from_the_benchmark_generators():
    train, val = pretraining_records("train", 3, seed=5), pretraining_records("val", 2, seed=5)
    assert [r["image_id"] for r in train] == ["pretrain_train_0", "pretrain_train_1", "pretrain_train_2"]
    assert [r["render_key"] for r in val] == [[5, STREAM, 1, 0], [5, STREAM, 1, 1]]
    assert STREAM not in (0, 1, 2)  # the benchmark's splits draw from default_rng([seed, 0 | 1 | 2])
    with pytest.raises(ValueError, match=r"^pretraining split must be one of \('train', 'val'\), got 'test'$"):
        pretraining_records("test", 1)


def test_an_image_is_the_same_at_every_read_and_its_labels_are_its_scenes():
    record = pretraining_records("val", 1)[0]
    a, labels, scene = render_pretraining_image(record)
    b, again, _ = render_pretraining_image(record)
    assert np.array_equal(np.asarray(a), np.asarray(b)) and np.array_equal(labels, again)
    assert 2 <= len(scene["objects"]) <= 4 and a.size in ((128, 96), (96, 128), (128, 128))
    assert np.array_equal(labels, scene_labels(scene, PRETRAINING_GROUPS)) and labels.shape == (131,)
    planned, rng = _planned_scene(record)  # the rendered scene as a JPEG of the benchmark's quality, read back
    encoded = io.BytesIO()
    render_scene(planned, rng).save(encoded, "JPEG", quality=JPEG_QUALITY)
    assert np.array_equal(np.asarray(a), np.asarray(Image.open(encoded).convert("RGB")))
    assert pretraining_truth(record) == {"width": a.size[0], "height": a.size[1], **scene}  # the same scene, undrawn
    other, _, _ = render_pretraining_image(pretraining_records("val", 2)[1])
    assert not np.array_equal(np.asarray(a), np.asarray(other)) or a.size != other.size


def test_the_registered_splits():
    assert len(DatasetCatalog.get("builtin_pretraining_train")) == 100_000
    assert len(DatasetCatalog.get("builtin_pretraining_val")) == 1_000
    assert MetadataCatalog.get("builtin_pretraining_val").evaluator_type == "image_labels"


def _mapper(is_train, flip):
    return ImageLabelsMapper(is_train, size=64, groups=PRETRAINING_GROUPS, image_format="BGR", random_flip=flip)


def test_the_mapper_resizes_to_a_square_in_bgr_and_gives_the_labels():
    record = pretraining_records("val", 1)[0]
    image, labels, _ = render_pretraining_image(record)
    x = _mapper(False, False)(record)
    assert x["image"].shape == (3, 64, 64) and x["image"].dtype == torch.uint8 and x["image_id"] == "pretrain_val_0"
    # the resize of the benchmark's mappers (Detectron2's T.Resize, RESIZE_MODE "square")
    from detectron2.data import transforms as T

    bgr = np.asarray(image)[:, :, ::-1].copy()
    expected = T.Resize((64, 64)).get_transform(bgr).apply_image(bgr).transpose(2, 0, 1)
    assert np.array_equal(x["image"].numpy(), expected)
    assert x["labels"].dtype == torch.float32 and x["labels"].tolist() == labels.astype(float).tolist()
    assert len(label_names(PRETRAINING_GROUPS)) == x["labels"].numel()


def test_flips_only_in_training_and_only_when_asked():
    record = pretraining_records("val", 1)[0]
    plain = _mapper(False, True)(record)["image"]
    np.random.seed(0)
    flipped = [_mapper(True, True)(record)["image"] for _ in range(8)]
    assert any(torch.equal(f, plain.flip(-1)) for f in flipped) and any(torch.equal(f, plain) for f in flipped)
    assert all(torch.equal(_mapper(True, False)(record)["image"], plain) for _ in range(3))


def test_a_record_without_its_key_is_named():
    with pytest.raises(KeyError, match="image 'x' of an image-labels split has no 'render_key'"):
        _mapper(False, False)({"image_id": "x"})


def test_the_pretraining_split_draws_every_combination_the_benchmark_holds_out_of_training():
    from phrasedet.data.synthetic.scene import COLOURS, HELD_OUT_COMBOS, SHAPES

    drawn, sizes = {}, Counter()
    for record in pretraining_records("train", 400):
        objects = pretraining_truth(record)["objects"]
        sizes[len(objects)] += 1
        for o in objects:
            drawn[(o["colour"], o["shape"])] = drawn.get((o["colour"], o["shape"]), 0) + 1
    assert sorted(sizes) == [2, 3, 4]  # 2 to 4 objects, as the module says: a scene planned with fewer is planned again
    assert set(drawn) == {(c, s) for c in COLOURS for s in SHAPES}  # all 48, as ImageNet holds every object
    # the held-out ones as often as the rest: at least half the mean count (the benchmark's training split: never)
    mean = sum(drawn.values()) / len(drawn)
    assert min(drawn[c] for c in HELD_OUT_COMBOS) > mean / 2, {c: drawn[c] for c in HELD_OUT_COMBOS}
