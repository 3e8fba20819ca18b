"""Visual Genome region descriptions -> pointing records: the join by image id, every filter and
its count in the log, the errors (file, index, key), registration."""
import json
import os

import pytest
from detectron2.data import DatasetCatalog, MetadataCatalog
from detectron2.structures import BoxMode
from PIL import Image

from phrasedet.data.datasets import (
    BadAnnotationError,
    load_visual_genome_pointing,
    read_vg_image_data,
    register_visual_genome_pointing,
)

URL = "https://cs.stanford.edu/people/rak248/{}/{}.jpg"

# image id -> (coco id, width, height, folder). 2 is in COCO train2014 only, 3 has no coco id, 4 is a
# Karpathy restval image, 5 a Karpathy test image, 6 a Karpathy val image whose only region is empty.
IMAGES = {1: (100, 800, 600, "VG_100K_2"), 2: (200, 500, 400, "VG_100K"), 3: (None, 500, 400, "VG_100K"),
          4: (400, 300, 200, "VG_100K"), 5: (500, 640, 480, "VG_100K"), 6: (600, 300, 200, "VG_100K_2")}
VAL2014 = (100, 400, 500, 600, 700)
KARPATHY = {100: "val", 200: "train", 400: "restval", 500: "test", 600: "val"}


def _region(region_id, image_id, phrase, x, y, w, h):
    return {"region_id": region_id, "image_id": image_id, "phrase": phrase, "x": x, "y": y, "width": w, "height": h}


def region_descriptions():
    """Images in the order 5, 9 (absent from image_data.json), 1, 2, 3, 4, 6."""
    return [
        {"id": 5, "regions": [_region(51, 5, "A red   Bus.", 10, 20, 30, 40),
                              _region(52, 5, "tree", 700, 10, 20, 20)]},  # entirely right of the 640-wide image
        {"id": 9, "regions": [_region(91, 9, "a cat", 1, 1, 5, 5)]},
        {"id": 1, "regions": [_region(11, 1, "  the clock is green ", 421, 57, 82, 139),
                              _region(12, 1, "", 1, 1, 10, 10),
                              _region(13, 1, "ab", 1, 1, 10, 10),
                              _region(14, 1, "man on a horse", 700, 500, 101, 100),  # 1 pixel out: clipped
                              _region(15, 1, "sky", 0, 0, 0, 10)]},
        {"id": 2, "regions": [_region(21, 2, "a dog", 1, 1, 10, 10)]},
        {"id": 3, "regions": [_region(31, 3, "a dog", 1, 1, 10, 10)]},
        {"id": 4, "regions": [_region(41, 4, "white dog", 5, 6, 7, 8)]},
        {"id": 6, "regions": [_region(61, 6, "   ", 1, 1, 10, 10)]},
    ]


def image_data():
    """In image id order: not region_descriptions.json's order."""
    return [{"image_id": i, "coco_id": c, "width": w, "height": h, "url": URL.format(folder, i)}
            for i, (c, w, h, folder) in sorted(IMAGES.items())]


def _write_json(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f)
    return path


def _karpathy():
    return {"images": [{"filename": f"COCO_{c}.jpg", "filepath": "val2014", "cocoid": c, "split": s,
                        "sentences": [{"raw": "a caption", "sentid": c}]} for c, s in KARPATHY.items()]}


def write_vg_root(root, regions=None, images=None):
    """``root/visual_genome/`` (JSON files and the images of 1, 4, 5) and ``root/coco/``; returns
    the loader's first five arguments."""
    vg = os.path.join(root, "visual_genome")
    paths = (
        _write_json(os.path.join(vg, "region_descriptions.json"), region_descriptions() if regions is None else regions),
        _write_json(os.path.join(vg, "image_data.json"), image_data() if images is None else images),
        vg,
        _write_json(os.path.join(root, "coco", "annotations", "captions_val2014.json"),
                    {"images": [{"id": c} for c in VAL2014], "annotations": []}),
        _write_json(os.path.join(root, "coco", "dataset_coco.json"), _karpathy()),
    )
    for image_id in (1, 4, 5, 6):
        _, w, h, folder = IMAGES[image_id]
        os.makedirs(os.path.join(vg, folder), exist_ok=True)
        Image.new("RGB", (w, h)).save(os.path.join(vg, folder, f"{image_id}.jpg"))
    return paths


def _query(text, phrase, bbox, query_id):
    return {"text": text, "phrase": phrase, "bbox": bbox, "bbox_mode": BoxMode.XYXY_ABS, "query_id": query_id}


def _record(root, image_id, queries):
    coco_id, w, h, folder = IMAGES[image_id]
    return {"file_name": os.path.join(root, "visual_genome", folder, f"{image_id}.jpg"), "image_id": str(image_id),
            "height": h, "width": w, "dataset": "visual_genome", "queries": queries, "coco_id": coco_id}


def expected(root):
    return [
        _record(root, 5, [_query("A red Bus.", "red bus", [10.0, 20.0, 40.0, 60.0], "51")]),
        _record(root, 1, [_query("the clock is green", "clock green", [421.0, 57.0, 503.0, 196.0], "11"),
                          _query("man on a horse", "man horse", [700.0, 500.0, 800.0, 600.0], "14")]),
        _record(root, 4, [_query("white dog", "white dog", [5.0, 6.0, 12.0, 14.0], "41")]),
    ]


def test_records_joined_by_image_id_with_every_skip_counted(tmp_path, caplog):
    root = str(tmp_path)
    paths = write_vg_root(root)
    with caplog.at_level("INFO"):
        records = load_visual_genome_pointing(*paths[:4])
    assert records == expected(root)
    log = caplog.text
    assert "Loaded 3 Visual Genome images for the pointing game: 4 regions kept as queries; 9 regions in the 4 selected images" in log
    assert (f"Of 7 images of {paths[0]}, left out: 1 not in image_data.json, 1 without coco_id, 1 whose coco_id "
            f"is not in {paths[3]}, no Karpathy exclusion, 1 with no region left.") in log
    assert ("Regions skipped: 2 empty phrases, 1 phrases shorter than 3 characters, 1 boxes of zero size, "
            "1 boxes entirely outside the image; 1 boxes clipped to the image (box_policy=clip).") in log


def test_karpathy_file_leaves_out_rval_training_images(tmp_path, caplog):
    root = str(tmp_path)
    paths = write_vg_root(root)
    with caplog.at_level("INFO"):
        records = load_visual_genome_pointing(*paths)
    assert records == expected(root)[:2]  # image 4 is restval
    assert (f"1 whose cocoid is in Karpathy split(s) train, restval of {paths[4]} (0 images absent from that file "
            "kept)") in caplog.text
    only_test = load_visual_genome_pointing(*paths, exclude_splits=("val", "restval"))
    assert [r["image_id"] for r in only_test] == ["5"]


def test_min_phrase_chars_and_error_box_policy(tmp_path):
    paths = write_vg_root(str(tmp_path))
    short_kept = load_visual_genome_pointing(*paths[:4], min_phrase_chars=1)
    assert [q["text"] for q in short_kept[1]["queries"]] == ["the clock is green", "ab", "man on a horse"]
    with pytest.raises(BadAnnotationError, match=r"region_descriptions.json: \[0\].regions\[1\]: box \[700, 10, 720, 30\] .* lies outside the 640x480"):
        load_visual_genome_pointing(*paths[:4], box_policy="error")
    with pytest.raises(ValueError, match="box policy"):
        load_visual_genome_pointing(*paths[:4], box_policy="drop")
    with pytest.raises(ValueError, match="exclude_splits"):
        load_visual_genome_pointing(*paths, exclude_splits=("training",))


def test_image_files_checked_unless_asked_not_to(tmp_path):
    root = str(tmp_path)
    paths = write_vg_root(root)
    os.remove(os.path.join(root, "visual_genome", "VG_100K", "4.jpg"))
    with pytest.raises(FileNotFoundError, match=r"Visual Genome: 1 of 3 image files are missing, e.g. .*4.jpg"):
        load_visual_genome_pointing(*paths[:4])
    assert len(load_visual_genome_pointing(*paths[:4], check_images=False)) == 3


def _broken(path_index, edit):
    """(files with one entry edited, the path of the edited file)."""
    regions, images = region_descriptions(), image_data()
    edit(regions if path_index == 0 else images)
    return regions, images


@pytest.mark.parametrize("path_index, edit, message", [
    (0, lambda r: r[2]["regions"][1].update(image_id=5),
     r"region_descriptions.json: \[2\].regions\[1\]: key 'image_id' is 5 but the entry's 'id' is 1"),
    (0, lambda r: r[2]["regions"][0].pop("phrase"), r"region_descriptions.json: \[2\].regions\[0\]: missing key 'phrase'"),
    (0, lambda r: r[2]["regions"][4].update(x="5"),  # checked although the region is skipped (zero width)
     r"region_descriptions.json: \[2\].regions\[4\]: key 'x' must be a finite number, got '5'"),
    (0, lambda r: r[0]["regions"][0].update(phrase=None), r"\[0\].regions\[0\]: key 'phrase' must be a string, got None"),
    (0, lambda r: r[3].pop("regions"), r"region_descriptions.json: \[3\]: missing key 'regions'"),
    (0, lambda r: r.append({"id": 1, "regions": []}), r"region_descriptions.json: \[7\]: key 'id' 1 already at \[2\]"),
    (0, lambda r: r[0]["regions"].append(_region(51, 5, "bus", 1, 1, 2, 2)),
     r"region_descriptions.json: \[0\].regions\[2\]: key 'region_id' 51 already at .*\[0\].regions\[0\]"),
    (1, lambda i: i[3].pop("url"), r"image_data.json: \[3\]: missing key 'url'"),
    (1, lambda i: i[0].update(coco_id="100"), r"image_data.json: \[0\]: key 'coco_id' must be an integer, got '100'"),
    (1, lambda i: i[0].update(url=URL.format("VG_100K", 7)), r"image_data.json: \[0\]: key 'url' .* does not end in '<folder>/1.jpg'"),
    (1, lambda i: i[1].update(image_id=1, url=URL.format("VG_100K", 1)), r"image_data.json: \[1\]: key 'image_id' 1 already at \[0\]"),
])
def test_errors_name_file_index_and_key(tmp_path, path_index, edit, message):
    regions, images = _broken(path_index, edit)
    paths = write_vg_root(str(tmp_path), regions, images)
    with pytest.raises(BadAnnotationError, match=message):
        load_visual_genome_pointing(*paths)


def test_regions_of_images_left_out_are_not_read(tmp_path):
    root = str(tmp_path)
    regions = region_descriptions()
    regions[3]["regions"][0] = {"image_id": 7}  # image 2 is in COCO train2014 only
    assert load_visual_genome_pointing(*write_vg_root(root, regions)[:4]) == expected(root)


def test_read_vg_image_data_gives_url_folder(tmp_path):
    paths = write_vg_root(str(tmp_path))
    images = read_vg_image_data(paths[1])
    assert (images[1].folder, images[1].file, images[1].coco_id, images[3].coco_id) == ("VG_100K_2", "1.jpg", 100, None)


def test_register_visual_genome_pointing(tmp_path):
    root = str(tmp_path)
    paths = write_vg_root(root)
    name = f"test_vg_pointing_{os.getpid()}_{tmp_path.name}"
    register_visual_genome_pointing(name, *paths, split="coco_val2014")
    assert DatasetCatalog.get(name) == expected(root)[:2]
    meta = MetadataCatalog.get(name)
    assert (meta.evaluator_type, meta.dataset, meta.exclude_karpathy_splits, meta.split) == (
        "pointing", "visual_genome", ("train", "restval"), "coco_val2014")


def test_builtin_names_read_the_documented_layout(tmp_path, monkeypatch):
    root = str(tmp_path)
    write_vg_root(root)
    monkeypatch.setenv("PHRASEDET_DATASETS", root)
    assert DatasetCatalog.get("visual_genome_pointing") == expected(root)
    assert DatasetCatalog.get("visual_genome_pointing_unseen") == expected(root)[:2]
    assert MetadataCatalog.get("visual_genome_pointing").evaluator_type == "pointing"
    assert MetadataCatalog.get("visual_genome_pointing_unseen").exclude_karpathy_splits == ("train", "restval")


def test_builtin_names_fall_back_to_instances_val2014(tmp_path, monkeypatch):
    root = str(tmp_path)
    write_vg_root(root)
    annotations = os.path.join(root, "coco", "annotations")
    os.rename(os.path.join(annotations, "captions_val2014.json"), os.path.join(annotations, "instances_val2014.json"))
    monkeypatch.setenv("PHRASEDET_DATASETS", root)
    assert DatasetCatalog.get("visual_genome_pointing") == expected(root)


def test_builtin_names_say_where_visual_genome_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PHRASEDET_DATASETS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="Visual Genome .* not found at .*PHRASEDET_DATASETS"):
        DatasetCatalog.get("visual_genome_pointing")
