"""Small files in the real caption-dataset formats: Flickr30K's token file, Karpathy's
``dataset_flickr30k.json`` / ``dataset_coco.json``, COCO's official caption files and a VSE++
precomputed-feature folder. Captions are real ones (Flickr30K 1000092795 and 10002456, COCO
391895); the others are made up in the same style."""
import json
import os

import numpy as np

# Image 1000092795's captions as in Flickr30K (= tests/data/flickr_fixture.CAPTIONS without markup).
FLICKR_1000092795 = [
    "Two young guys with shaggy hair look at their hands while hanging out in the yard .",
    "Two young , White males are outside near many bushes .",
    "Two men in green shirts are standing in a yard .",
    "A man in a blue shirt standing in a garden .",
    "Two friends enjoy time spent together .",
]
FLICKR_10002456 = [
    "Several men in hard hats are operating a giant pulley system .",
    "Workers look down from up above on a piece of equipment .",
    "Two men working on a machine wearing hard hats .",
    "Four men on top of a tall structure .",
    "Three men on a large rig .",
]
FLICKR_1001773457 = [
    "A black dog and a white dog with brown spots are staring at each other in the street .",
    "A black dog and a tri-colored dog playing with each other on the road .",
    "Two dogs of different breeds looking at each other on the road .",
    "Two dogs on pavement moving toward each other .",
    "A black dog and a spotted dog are fighting",
]

# Token lines deliberately out of caption order for 1000092795 (the loader sorts by n).
TOKEN_ORDER = [("10002456", [0, 1, 2, 3, 4]), ("1000092795", [3, 0, 4, 1, 2])]
TOKEN_CAPTIONS = {"1000092795": FLICKR_1000092795, "10002456": FLICKR_10002456}


def token_lines():
    """The lines of a ``results_20130124.token`` for the two images, in ``TOKEN_ORDER``."""
    return [f"{i}.jpg#{n}\t{TOKEN_CAPTIONS[i][n]}" for i, ns in TOKEN_ORDER for n in ns]


def write_text(path, lines, prefix=b""):
    """Write ``lines`` (str) as UTF-8 with ``\\n`` ends, after the raw bytes ``prefix``."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(prefix + "".join(line + "\n" for line in lines).encode("utf-8"))
    return path


def write_json(path, data, prefix=b""):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(prefix + json.dumps(data, indent=1).encode("utf-8"))
    return path


def _karpathy_image(imgid, split, captions, first_sentid, **extra):
    sentids = list(range(first_sentid, first_sentid + len(captions)))
    sentences = [
        {"tokens": c.lower().rstrip(" .").split(), "raw": c, "imgid": imgid, "sentid": s}
        for c, s in zip(captions, sentids)
    ]
    return {"sentids": sentids, "imgid": imgid, "sentences": sentences, "split": split, **extra}


def karpathy_flickr():
    """``dataset_flickr30k.json`` with one train, one test and one val image (in that order)."""
    return {"images": [
        _karpathy_image(0, "train", FLICKR_1000092795, 0, filename="1000092795.jpg"),
        _karpathy_image(1, "test", FLICKR_10002456, 5, filename="10002456.jpg"),
        _karpathy_image(2, "val", FLICKR_1001773457, 10, filename="1001773457.jpg"),
    ], "dataset": "flickr30k"}


COCO_391895 = [
    "A man with a red helmet on a small moped on a dirt road. ",
    "Man riding a motor bike on a dirt road on the countryside.",
    "A man riding on the back of a motorcycle.",
    "A dirt path with a young person on a motor bike rests to the foreground of a verdant area "
    "with a bridge and a background of cloud-wreathed mountains. ",
    "A man in a red shirt and a red hat is on a motorcycle on a hill side.",
]
COCO_522418 = [  # six captions: one beyond the standard five
    "A woman wearing a net on her head cutting a cake. ",
    "A woman cutting a large white sheet cake.",
    "A woman wearing a hair net cutting a large sheet cake.",
    "there is a woman that is cutting a white cake",
    "A woman marking a cake with the back of a chef's knife. ",
    "A woman with a knife over a white cake.",
]
COCO_318556 = [
    "A very clean and well decorated empty bathroom",
    "A blue and white bathroom with butterfly themed wall tiles.",
    "A bathroom with a border of butterflies and blue paint on the walls above it.",
    "An angled view of a beautifully decorated bathroom.",
    "A clock that blends in with the wall hangs in a bathroom. ",
]
COCO_554625 = [
    "A child holding a flowered umbrella and petting a yak.",
    "A young man holding an umbrella next to a herd of cattle.",
    "a young boy barefoot holding an umbrella touching the horn of a cow",
    "A young boy with an umbrella who is touching the horn of a cow.",
    "A boy holding an umbrella while standing next to livestock.",
]
# cocoid -> (filepath, Karpathy split, captions, first sentid, official annotation ids, height, width)
COCO_IMAGES = {
    391895: ("val2014", "test", COCO_391895, 770337, [1636, 156, 603, 509, 1413], 360, 640),
    522418: ("val2014", "restval", COCO_522418, 770343, [681, 4, 1099, 4799, 27, 30], 480, 640),
    318556: ("train2014", "train", COCO_318556, 770349, [48, 67, 126, 147, 173], 640, 480),
    554625: ("val2014", "val", COCO_554625, 770354, [2, 7, 11, 13, 17], 640, 426),
}


def coco_file_name(cocoid, images=COCO_IMAGES):
    filepath = images[cocoid][0]
    return f"COCO_{filepath}_{cocoid:012d}.jpg"


def karpathy_coco(images=COCO_IMAGES):
    """``dataset_coco.json`` with the images of ``images`` (default: the four of ``COCO_IMAGES``) in that order."""
    entries = [
        _karpathy_image(k, split, caps, sentid, filepath=filepath, filename=coco_file_name(cocoid, images), cocoid=cocoid)
        for k, (cocoid, (filepath, split, caps, sentid, _, _, _)) in enumerate(images.items())
    ]
    return {"images": entries, "dataset": "coco"}


def official_coco(filepath, images=COCO_IMAGES):
    """``captions_<filepath>.json`` for the images of ``images`` in ``filepath``; annotations
    in file order, i.e. not sorted by id."""
    mine = {c: v for c, v in images.items() if v[0] == filepath}
    return {
        "info": {}, "licenses": [],
        "images": [{"id": c, "file_name": coco_file_name(c, images), "height": h, "width": w} for c, (*_, h, w) in mine.items()],
        "annotations": [
            {"image_id": c, "id": ann_id, "caption": cap}
            for c, (_, _, caps, _, ann_ids, _, _) in mine.items() for ann_id, cap in zip(ann_ids, caps)
        ],
    }


def write_coco_root(root, images=COCO_IMAGES):
    """``coco/dataset_coco.json`` and ``coco/annotations/captions_{train,val}2014.json`` under ``root``
    for ``images`` (``COCO_IMAGES``' layout)."""
    coco = os.path.join(root, "coco")
    karpathy = write_json(os.path.join(coco, "dataset_coco.json"), karpathy_coco(images))
    official = tuple(
        write_json(os.path.join(coco, "annotations", f"captions_{p}.json"), official_coco(p, images)) for p in ("train2014", "val2014")
    )
    return coco, karpathy, official


PRECOMP_CAPTIONS = FLICKR_1000092795 + FLICKR_10002456


def write_precomp(data_dir, split="test", rows=2, captions=PRECOMP_CAPTIONS, dim=4):
    """``<split>_caps.txt`` and a ``rows`` x ``dim`` float32 ``<split>_ims.npy`` under ``data_dir``."""
    caps = write_text(os.path.join(data_dir, f"{split}_caps.txt"), captions)
    ims = os.path.join(data_dir, f"{split}_ims.npy")
    np.save(ims, np.arange(rows * dim, dtype=np.float32).reshape(rows, dim))
    return caps, ims
