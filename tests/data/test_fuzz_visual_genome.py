"""Fuzz tests (tests/fuzz.py) of the Visual Genome pointing loader: a damaged
``region_descriptions.json``, ``image_data.json``, COCO image-id file or Karpathy file (one per
test) loads, or fails with a BadFileError naming it; plain tests pin typical messages."""
import json
import os

import pytest
from hypothesis import given

from phrasedet.data.datasets import BadAnnotationError, load_visual_genome_pointing
from tests.fuzz import check_reader, damaged_json, fuzz_settings, write_file

URL = "https://cs.stanford.edu/people/rak248/VG_100K/{}.jpg"
REGIONS = [
    {"id": 1, "regions": [{"region_id": 11, "image_id": 1, "phrase": "a red bus", "x": 10, "y": 20, "width": 30, "height": 40},
                          {"region_id": 12, "image_id": 1, "phrase": "sky", "x": 0, "y": 0, "width": 5.5, "height": 9}]},
    {"id": 2, "regions": [{"region_id": 21, "image_id": 2, "phrase": "a dog", "x": 1, "y": 1, "width": 10, "height": 10}]},
]
IMAGE_DATA = [{"image_id": 1, "coco_id": 100, "width": 640, "height": 480, "url": URL.format(1)},
              {"image_id": 2, "coco_id": 200, "width": 500, "height": 400, "url": URL.format(2)}]
COCO = {"images": [{"id": 100}, {"id": 200}]}
KARPATHY = {"images": [{"filename": "COCO_val2014_000000000100.jpg", "filepath": "val2014", "cocoid": 100,
                        "split": "test", "sentences": [{"raw": "A bus .", "sentid": 1}]},
                       {"filename": "COCO_val2014_000000000200.jpg", "filepath": "val2014", "cocoid": 200,
                        "split": "train", "sentences": [{"raw": "A dog .", "sentid": 2}]}]}
NAMES = ("region_descriptions.json", "image_data.json", "captions_val2014.json", "dataset_coco.json")
VALID = dict(zip(NAMES, (REGIONS, IMAGE_DATA, COCO, KARPATHY)))


def _vg_files(tmp_path_factory, name, data):
    """The four files in one folder, ``name`` holding ``data`` (bytes), the others valid."""
    damaged = write_file(tmp_path_factory, f"vg/{name}", data)
    folder = os.path.dirname(damaged)
    for other in NAMES:
        if other != name:
            with open(os.path.join(folder, other), "w") as f:
                json.dump(VALID[other], f)
    return [os.path.join(folder, n) for n in NAMES], damaged


def _load(paths):
    regions, images, coco, karpathy = paths
    return lambda: load_visual_genome_pointing(regions, images, "/vg", coco, karpathy, check_images=False)


@pytest.mark.parametrize("name", NAMES)
def test_damaged_file(tmp_path_factory, name):
    @fuzz_settings
    @given(data=damaged_json(VALID[name]))
    def fuzz(data):
        paths, damaged = _vg_files(tmp_path_factory, name, data)
        check_reader(_load(paths), damaged)

    fuzz()


def _broken(tmp_path_factory, name, edit):
    data = json.loads(json.dumps(VALID[name]))
    edit(data)
    return _load(_vg_files(tmp_path_factory, name, json.dumps(data).encode())[0])


@pytest.mark.parametrize("name, edit, message", [
    ("region_descriptions.json", lambda r: r[0]["regions"][1].update(width=float("nan")),
     r"region_descriptions\.json: \[0\]\.regions\[1\]: key 'width' must be a finite number, got nan$"),
    ("region_descriptions.json", lambda r: r[0]["regions"][0].update(image_id=[1]),
     r"region_descriptions\.json: \[0\]\.regions\[0\]: key 'image_id' is \[1\] but the entry's 'id' is 1$"),
    ("image_data.json", lambda i: i[1].update(width=float("inf")),
     r"image_data\.json: \[1\]: key 'width' must be an integer, got inf$"),
    ("image_data.json", lambda i: i[0].update(url="https://[cs.stanford.edu/VG_100K/1.jpg"),
     r"image_data\.json: \[0\]: key 'url' 'https://\[cs\.stanford\.edu/VG_100K/1\.jpg' is not a URL: Invalid IPv6 URL$"),
    ("captions_val2014.json", lambda c: c["images"][1].update(id=[200]),
     r"captions_val2014\.json: images\[1\]: key 'id' must be an integer, got \[200\]$"),
    ("dataset_coco.json", lambda k: k["images"][1].update(filepath=None),
     r"dataset_coco\.json: images\[1\]: key 'filepath' must be a string, got None$"),
])
def test_typical_damage_names_file_record_and_key(tmp_path_factory, name, edit, message):
    with pytest.raises(BadAnnotationError, match=message):
        _broken(tmp_path_factory, name, edit)()
