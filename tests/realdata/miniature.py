"""A miniature of every real dataset, in the upstream formats and the layout ``builtin.py`` reads
under ``$PHRASEDET_DATASETS`` (docs/DATA.md, "The miniature tree"):

```
flickr30k_entities/{Sentences,Annotations}/, {train,val,test}.txt, UNRELATED_CAPTIONS
flickr30k-images/<id>.jpg
flickr30k/results_20130124.token, dataset_flickr30k.json
coco/dataset_coco.json, annotations/captions_{train,val}2014.json, {train,val}2014/COCO_*.jpg
data/{f30k,coco}_precomp/<split>_caps.txt, <split>_ims.npy
refclef/instances.json, refs(berkeley).p, refs(unc).p; images/saiapr_tc-12/<dd>/images/<id>.jpg
visual_genome/region_descriptions.json, image_data.json, VG_100K{,_2}/<id>.jpg
features/flickr30k_vgg19_10crop/flickr30k_entities_captions_<split>.{npy,txt}   (two_branch_flickr.yaml)
word_vectors/skip_thoughts_utable_620d.txt                                      (dsve_loc_R152_coco.yaml)
```

Every split of every registered real dataset is non-empty (``EXPECTED_IMAGES`` gives the counts).
Images are small one-colour JPEGs of the sizes the annotations state. Captions are real ones
(Flickr30K 1000092795, 10002456, 1001773457; COCO 391895, 522418, 318556, 554625, from
``tests/data``' fixtures) or made up in the same style; ids are real ones of the split lists (the
ReferIt splits are Hu et al.'s shipped image lists, which the loader always uses).
"""
import os
import pickle

import numpy as np
from detectron2.data import DatasetCatalog, MetadataCatalog
from PIL import Image

from phrasedet.data.datasets import EVALUATOR_TYPE, POINTING_EVALUATOR_TYPE, RETRIEVAL_EVALUATOR_TYPE
from phrasedet.text import caption_words
from tests.data.caption_fixtures import (
    COCO_IMAGES,
    _karpathy_image,
    coco_file_name,
    write_coco_root,
    write_json,
    write_text,
)
from tests.data.flickr_fixture import CAPTIONS as CAPTIONS_1000092795
from tests.data.flickr_fixture import write_flickr_root

__all__ = ["build_miniature", "is_real_split", "EXPECTED_IMAGES", "VGG19_DIM", "PRECOMP_DIM", "SKIP_THOUGHTS_DIM"]

VGG19_DIM = 4096  # paper 000's image features: VGG-19 fc7 (10 crops averaged)
PRECOMP_DIM = 4096  # VSE++'s *_precomp release: VGG-19 fc7 rows
SKIP_THOUGHTS_DIM = 620  # Skip-Thoughts' uni-skip word table
FEATURES_DIR = os.path.join("features", "flickr30k_vgg19_10crop")
WORD_VECTORS_FILE = os.path.join("word_vectors", "skip_thoughts_utable_620d.txt")

# ---- Flickr30K Entities: image id -> (split, (width, height), markup captions, objects) ----------
# An object: (chain ids, box [xmin, ymin, xmax, ymax] 1-based inclusive) or (chain ids, "scene") or
# (chain ids, "nobox"). 1000092795 is tests/data/flickr_fixture's (its XML, 333 x 500).
FLICKR = {
    "10002456": ("train", (64, 48), [
        "[/EN#1/people Several men] in [/EN#2/clothing hard hats] are operating [/EN#3/other a giant pulley system] .",
        "[/EN#4/people Workers] look down from up above on [/EN#3/other a piece of equipment] .",
        "[/EN#1/people Two men] working on [/EN#3/other a machine] wearing [/EN#2/clothing hard hats] .",
        "[/EN#1/people Four men] on top of [/EN#5/other a tall structure] .",
        "[/EN#1/people Three men] on [/EN#5/other a large rig] .",
    ], [(("1", "4"), [5, 10, 30, 46]), (("1", "4"), [33, 12, 60, 47]), (("2",), [8, 10, 56, 20]),
        (("3",), [20, 1, 64, 30]), (("5",), "nobox")]),
    "1001773457": ("train", (64, 48), [
        "[/EN#1/animals A black dog] and [/EN#2/animals a white dog with brown spots] are staring at each other in [/EN#3/scene the street] .",
        "[/EN#1/animals A black dog] and [/EN#2/animals a tri-colored dog] playing with each other on [/EN#3/scene the road] .",
        "[/EN#4/animals Two dogs of different breeds] looking at each other on [/EN#3/scene the road] .",
        "[/EN#4/animals Two dogs] on [/EN#3/scene pavement] moving toward each other .",
        "[/EN#1/animals A black dog] and [/EN#2/animals a spotted dog] are fighting",
    ], [(("1", "4"), [4, 15, 28, 44]), (("2", "4"), [36, 12, 62, 45]), (("3",), "scene")]),
    "100652400": ("val", (48, 64), [
        "[/EN#1/people A young man] in [/EN#2/clothing a green shirt] is standing in [/EN#3/scene a garden] .",
        "[/EN#1/people A man] looks at [/EN#4/bodyparts his hands] .",
        "[/EN#1/people A man] in [/EN#2/clothing a shirt] stands near [/EN#5/other many bushes] .",
        "[/EN#1/people A person] is outside .",
        "[/EN#1/people The man] is in [/EN#3/scene the yard] .",
    ], [(("1",), [10, 5, 40, 62]), (("2",), [12, 20, 38, 40]), (("4",), [15, 38, 30, 46]),
        (("5",), [1, 40, 48, 64]), (("3",), "scene")]),
    "1016887272": ("test", (64, 48), [
        "[/EN#1/people Two men] in [/EN#2/clothing hard hats] are standing on [/EN#3/scene the street] .",
        "[/EN#1/people Two workers] look at [/EN#4/other a machine] .",
        "[/EN#1/people Two young men] are working outside .",
        "[/EN#5/people A man] in [/EN#6/clothing a blue shirt] stands near [/EN#4/other a large machine] .",
        "[/EN#1/people Men] working on [/EN#3/scene the road] .",
    ], [(("1", "5"), [3, 8, 25, 47]), (("1",), [30, 10, 50, 46]), (("2",), [5, 8, 48, 16]),
        (("6",), [5, 18, 24, 32]), (("4",), [50, 20, 64, 48]), (("3",), "scene")]),
    "3000017878": ("test", (64, 48), [
        "[/EN#1/animals A black dog] runs on [/EN#2/scene the grass] .",
        "[/EN#1/animals A dog] is running in [/EN#2/scene a yard] .",
        "[/EN#1/animals The black dog] plays outside .",
        "[/EN#1/animals A dog] with [/EN#3/other a red ball] in [/EN#2/scene the yard] .",
        "[/EN#0/notvisual Someone] is cooking dinner in [/EN#4/scene a kitchen] .",
    ], [(("1",), [10, 12, 40, 40]), (("3",), [42, 30, 50, 38]), (("2",), "scene"), (("4",), "nobox")]),
}
FLICKR_SPLIT_OF_1000092795 = "train"
# (image id, 1-based caption number): 3000017878's fifth caption is about another picture.
UNRELATED = [("3000017878", 5)]

# ---- COCO: cocoid -> (filepath, Karpathy split, captions, first sentid, annotation ids, height, width) --
# tests/data/caption_fixtures' four, and six made up (COCO's 5K test and 1K folds need a multiple of 5).
COCO_MINI = {
    **COCO_IMAGES,
    262148: ("val2014", "test", [
        "A plate of food with broccoli and rice on a table.",
        "A white plate topped with rice and green vegetables.",
        "Broccoli and rice served on a white plate.",
        "A meal of rice and broccoli sits on the table.",
        "A close up of a plate of rice with broccoli.",
    ], 770359, [3001, 3002, 3003, 3004, 3005], 48, 64),
    393225: ("val2014", "test", [
        "A red bus driving down a city street.",
        "A large red bus parked on the side of the road.",
        "A double decker bus on a busy street.",
        "A bus stopped at a bus stop next to a building.",
        "A red bus drives past a tall building.",
    ], 770364, [3011, 3012, 3013, 3014, 3015], 48, 64),
    131089: ("val2014", "test", [
        "A cat sitting on top of a wooden bench.",
        "A black cat is laying on a bench outside.",
        "A small cat rests on a park bench.",
        "A cat sleeping on a bench in the sun.",
        "A cat on a bench next to some plants.",
    ], 770369, [3021, 3022, 3023, 3024, 3025], 64, 48),
    524291: ("val2014", "test", [
        "Two giraffes standing next to a tall tree.",
        "A pair of giraffes eating leaves from a tree.",
        "Giraffes in a field with trees behind them.",
        "Two giraffes walking in a grassy field.",
        "A couple of giraffes near some trees in a zoo.",
    ], 770374, [3031, 3032, 3033, 3034, 3035], 48, 64),
    9: ("train2014", "train", [
        "A man riding a wave on top of a surfboard.",
        "A surfer rides a large wave in the ocean.",
        "A person on a surfboard riding a wave.",
        "A man surfing on a wave in the sea.",
        "A surfer in a black wetsuit on a wave.",
    ], 770379, [3041, 3042, 3043, 3044, 3045], 48, 64),
    42: ("val2014", "restval", [
        "A kitchen with a stove and a refrigerator.",
        "A clean kitchen with white cabinets and a sink.",
        "A small kitchen with a window over the sink.",
        "A kitchen with wooden cabinets and a white stove.",
        "An empty kitchen with a table and chairs.",
    ], 770384, [3051, 3052, 3053, 3054, 3055], 64, 48),
}

# ---- Visual Genome: image id -> (coco id, width, height, folder, regions (region id, phrase, x, y, w, h)) --
# 1-3 and 6 are in COCO val2014 (2 and 6 in Karpathy's restval / val), 4 has no coco id, 5 is a
# train2014 image: visual_genome_pointing keeps 1, 2, 3, 6; the unseen variant 1, 3, 6.
VISUAL_GENOME = {
    1: (391895, 64, 48, "VG_100K_2", [(101, "man wearing a red helmet", 20, 5, 20, 15),
                                      (102, "small moped on a dirt road", 10, 20, 40, 25),
                                      (103, "green hills in the background", 0, 0, 64, 12)]),
    2: (42, 48, 64, "VG_100K", [(201, "white stove in the kitchen", 5, 30, 20, 30),
                                (202, "a window over the sink", 25, 5, 20, 20)]),
    3: (554625, 64, 48, "VG_100K", [(301, "boy holding an umbrella", 10, 5, 20, 40),
                                    (302, "brown cow with horns", 35, 15, 28, 30)]),
    4: (None, 64, 48, "VG_100K", [(401, "a tree", 1, 1, 10, 10)]),
    5: (318556, 48, 64, "VG_100K", [(501, "blue tiles on the wall", 1, 1, 30, 30)]),
    6: (393225, 64, 48, "VG_100K_2", [(601, "red double decker bus", 5, 10, 50, 30),
                                      (602, "tall building behind the bus", 40, 0, 24, 40)]),
}

# ---- ReferIt (refclef): image id (from Hu et al.'s lists) -> (berkeley split, unc split, width, height,
# refs: (ann id, category, box [x, y, w, h], expressions)) ------------------------------------------------
REFERIT = {
    15245: ("train", "train", 64, 48, [(1, "man", [10, 5, 15, 40], ["man on left", "guy in blue"]),
                                       (2, "sky", [0, 0, 64, 12], ["sky"])]),
    40338: ("train", "train", 48, 64, [(3, "tree", [20, 10, 25, 50], ["tree right", "big tree"])]),
    26953: ("val", "val", 64, 48, [(4, "water", [0, 30, 64, 18], ["water bottom"])]),
    9007: ("test", "testA", 64, 48, [(5, "man", [30, 8, 12, 38], ["man in middle"]),
                                     (6, "sky", [0, 0, 64, 10], ["sky top"])]),
    38677: ("test", "testB", 48, 64, [(7, "building", [5, 5, 38, 40], ["building on left", "house"])]),
}
CATEGORIES = ("man", "sky", "tree", "water", "building")

# Images per registered real split (the load test checks these, and each config's run uses them).
EXPECTED_IMAGES = {
    "flickr30k_entities_train": 3, "flickr30k_entities_val": 1, "flickr30k_entities_test": 2,
    "flickr30k_entities_captions_train": 3, "flickr30k_entities_captions_val": 1, "flickr30k_entities_captions_test": 2,
    "flickr30k_token_train": 3, "flickr30k_token_val": 1, "flickr30k_token_test": 2,
    "flickr30k_karpathy_train": 3, "flickr30k_karpathy_val": 1, "flickr30k_karpathy_test": 2,
    "flickr30k_entities_pointing_train": 3, "flickr30k_entities_pointing_val": 1, "flickr30k_entities_pointing_test": 2,
    "coco_karpathy_train": 4, "coco_karpathy_val": 1, "coco_karpathy_test": 5,
    "vsepp_f30k_precomp_train": 3, "vsepp_f30k_precomp_dev": 1, "vsepp_f30k_precomp_test": 2,
    "vsepp_coco_precomp_train": 4, "vsepp_coco_precomp_dev": 1, "vsepp_coco_precomp_test": 5,
    "vsepp_coco_precomp_testall": 10,
    "referit_train": 2, "referit_val": 1, "referit_trainval": 3, "referit_test": 2,
    "referit_pointing_train": 2, "referit_pointing_val": 1, "referit_pointing_trainval": 3, "referit_pointing_test": 2,
    "referit_unc_train": 2, "referit_unc_val": 1, "referit_unc_testA": 1, "referit_unc_testB": 1,
    "visual_genome_pointing": 4, "visual_genome_pointing_unseen": 3,
}


def is_real_split(name):
    """A split phrasedet registers (for one of its three tasks) that is not built in: one the
    miniature must hold."""
    if name not in DatasetCatalog.list():
        return False
    metadata = MetadataCatalog.get(name)
    return (metadata.get("evaluator_type", None) in (EVALUATOR_TYPE, RETRIEVAL_EVALUATOR_TYPE, POINTING_EVALUATOR_TYPE)
            and not metadata.get("builtin", False))


def _jpeg(path, width, height, seed):
    """A one-colour ``width`` x ``height`` JPEG (the colour from ``seed``)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    colour = tuple(int(c) for c in np.random.RandomState(seed).randint(0, 256, 3))
    Image.new("RGB", (width, height), colour).save(path)


def _strip_markup(caption):
    """A Flickr30K Entities caption without its ``[/EN#...`` markup (as the token and Karpathy files have it)."""
    words = []
    for word in caption.split():
        if word.startswith("[/EN#"):
            continue
        words.append(word.rstrip("]") if word.endswith("]") else word)
    return " ".join(words)


def _flickr_xml(image_id, size, objects):
    """An ``Annotations/<id>.xml`` in the release's PASCAL-VOC-like layout."""
    parts = []
    for names, what in objects:
        tags = "".join(f"<name>{n}</name>" for n in names)
        if what == "scene":
            body = "<nobndbox>0</nobndbox><scene>1</scene>"
        elif what == "nobox":
            body = "<nobndbox>1</nobndbox><scene>0</scene>"
        else:
            body = "<bndbox>" + "".join(f"<{k}>{v}</{k}>" for k, v in zip(("xmin", "ymin", "xmax", "ymax"), what)) + "</bndbox>"
        parts.append(f"  <object>{tags}{body}</object>")
    objects_xml = "\n".join(parts)
    return (f"<annotation>\n  <filename>{image_id}.jpg</filename>\n  <size><width>{size[0]}</width>"
            f"<height>{size[1]}</height><depth>3</depth></size>\n{objects_xml}\n</annotation>\n")


def flickr_captions():
    """{image id: (split, plain captions)} of every Flickr30K image of the miniature, in split-list order."""
    plain = {"1000092795": (FLICKR_SPLIT_OF_1000092795, [_strip_markup(c) for c in CAPTIONS_1000092795])}
    plain.update({i: (split, [_strip_markup(c) for c in caps]) for i, (split, _, caps, _) in FLICKR.items()})
    return plain


def _write_flickr30k_entities(root):
    ann_root, image_root = write_flickr_root(root)  # 1000092795: Sentences, Annotations, image
    for n, (image_id, (_, size, captions, objects)) in enumerate(FLICKR.items()):
        write_text(os.path.join(ann_root, "Sentences", f"{image_id}.txt"), captions)
        with open(os.path.join(ann_root, "Annotations", f"{image_id}.xml"), "w", encoding="utf-8") as f:
            f.write(_flickr_xml(image_id, size, objects))
        _jpeg(os.path.join(image_root, f"{image_id}.jpg"), *size, seed=n)
    captions = flickr_captions()
    for split in ("train", "val", "test"):
        write_text(os.path.join(ann_root, f"{split}.txt"), [i for i, (s, _) in captions.items() if s == split])
    write_text(os.path.join(ann_root, "UNRELATED_CAPTIONS"),
               ["# format: <imageID> <sentence number>"] + [f"{i} {n}" for i, n in UNRELATED])


def _write_flickr30k(root):
    """``flickr30k/results_20130124.token`` and Karpathy's ``dataset_flickr30k.json``."""
    captions = flickr_captions()
    folder = os.path.join(root, "flickr30k")
    write_text(os.path.join(folder, "results_20130124.token"),
               [f"{i}.jpg#{n}\t{c}" for i, (_, caps) in captions.items() for n, c in enumerate(caps)])
    images = [_karpathy_image(k, split, caps, 5 * k, filename=f"{i}.jpg") for k, (i, (split, caps)) in enumerate(captions.items())]
    write_json(os.path.join(folder, "dataset_flickr30k.json"), {"images": images, "dataset": "flickr30k"})


def _write_coco(root):
    write_coco_root(root, COCO_MINI)
    for cocoid, (filepath, _, _, _, _, height, width) in COCO_MINI.items():
        _jpeg(os.path.join(root, "coco", filepath, coco_file_name(cocoid, COCO_MINI)), width, height, seed=cocoid)


def _coco_split(splits):
    """Captions (5 per image) of the COCO images of the Karpathy split values ``splits``, in that
    order (``test`` first: VSE++'s ``test`` is the first 1K images of ``testall``)."""
    return [c for split in splits for (_, s, caps, *_) in COCO_MINI.values() if s == split for c in caps[:5]]


def _write_precomp(data_dir, split, captions, rows_per_image, seed):
    """VSE++'s ``<split>_caps.txt`` and ``<split>_ims.npy`` (``rows_per_image`` 1, or 5 as f30k's im_div)."""
    write_text(os.path.join(data_dir, f"{split}_caps.txt"), captions)
    rows = len(captions) // 5 * rows_per_image
    features = np.random.RandomState(seed).rand(rows, PRECOMP_DIM).astype(np.float32)
    np.save(os.path.join(data_dir, f"{split}_ims.npy"), features)


def _write_vsepp(root):
    flickr = flickr_captions()
    f30k = os.path.join(root, "data", "f30k_precomp")
    for k, (split, name) in enumerate((("train", "train"), ("val", "dev"), ("test", "test"))):
        _write_precomp(f30k, name, [c for s, caps in flickr.values() if s == split for c in caps], 5, seed=k)
    coco = os.path.join(root, "data", "coco_precomp")
    for k, (name, splits) in enumerate((("train", ("train", "restval")), ("dev", ("val",)), ("test", ("test",)),
                                        ("testall", ("test", "val", "train", "restval")))):
        _write_precomp(coco, name, _coco_split(splits), 1, seed=10 + k)


def _write_referit(root):
    refclef = os.path.join(root, "refclef")
    images, annotations, refs = [], [], {"berkeley": [], "unc": []}
    sent_id = 0
    for image_id, (berkeley, unc, width, height, objects) in REFERIT.items():
        images.append({"id": image_id, "file_name": f"{image_id}.jpg", "width": width, "height": height})
        _jpeg(os.path.join(root, "images", "saiapr_tc-12", f"{image_id // 1000:02d}", "images", f"{image_id}.jpg"),
              width, height, seed=image_id)
        for ann_id, category, box, expressions in objects:
            category_id = CATEGORIES.index(category) + 1
            annotations.append({"id": ann_id, "image_id": image_id, "bbox": box, "category_id": category_id,
                                "area": box[2] * box[3], "segmentation": []})
            sentences = [{"sent_id": sent_id + k, "raw": e, "sent": e, "tokens": e.split()} for k, e in enumerate(expressions)]
            sent_id += len(expressions)
            for split_by, split in (("berkeley", berkeley), ("unc", unc)):
                refs[split_by].append({"ref_id": ann_id, "ann_id": ann_id, "image_id": image_id, "category_id": category_id,
                                       "file_name": f"{image_id}_{ann_id}.jpg", "split": split,
                                       "sent_ids": [s["sent_id"] for s in sentences], "sentences": sentences})
    write_json(os.path.join(refclef, "instances.json"), {
        "images": images, "annotations": annotations,
        "categories": [{"id": k + 1, "name": n} for k, n in enumerate(CATEGORIES)]})
    for split_by, entries in refs.items():
        with open(os.path.join(refclef, f"refs({split_by}).p"), "wb") as f:
            pickle.dump(entries, f, protocol=2)  # the REFER release was pickled by Python 2


def _write_visual_genome(root):
    vg = os.path.join(root, "visual_genome")
    regions, image_data = [], []
    for image_id, (coco_id, width, height, folder, entries) in VISUAL_GENOME.items():
        regions.append({"id": image_id, "regions": [
            {"region_id": r, "image_id": image_id, "phrase": p, "x": x, "y": y, "width": w, "height": h}
            for r, p, x, y, w, h in entries]})
        image_data.append({"image_id": image_id, "coco_id": coco_id, "width": width, "height": height,
                           "url": f"https://cs.stanford.edu/people/rak248/{folder}/{image_id}.jpg"})
        _jpeg(os.path.join(vg, folder, f"{image_id}.jpg"), width, height, seed=image_id)
    write_json(os.path.join(vg, "region_descriptions.json"), regions)
    write_json(os.path.join(vg, "image_data.json"), image_data)


def _write_vgg19_features(root):
    """Paper 000's image features for two_branch_flickr.yaml: a [N, 4096] row per image of each
    Flickr30K Entities split, with its ids file (``phrasedet/data/image_features.py``'s layout)."""
    folder = os.path.join(root, FEATURES_DIR)
    os.makedirs(folder, exist_ok=True)
    captions = flickr_captions()
    for k, split in enumerate(("train", "val", "test")):
        ids = [i for i, (s, _) in captions.items() if s == split]
        name = f"flickr30k_entities_captions_{split}"
        np.save(os.path.join(folder, f"{name}.npy"), np.random.RandomState(k).rand(len(ids), VGG19_DIM).astype(np.float32))
        write_text(os.path.join(folder, f"{name}.txt"), ids)


def _write_skip_thoughts(root):
    """A word2vec text file of 620-d vectors for every word of the COCO captions (dsve_loc_R152_coco.yaml)."""
    words = sorted({w for (_, _, caps, *_) in COCO_MINI.values() for c in caps for w in caption_words(c)})
    vectors = np.random.RandomState(0).randn(len(words), SKIP_THOUGHTS_DIM).astype(np.float32)
    lines = [f"{len(words)} {SKIP_THOUGHTS_DIM}"] + [w + " " + " ".join(f"{v:.4f}" for v in row) for w, row in zip(words, vectors)]
    write_text(os.path.join(root, WORD_VECTORS_FILE), lines)


def build_miniature(root):
    """Write the whole miniature ``$PHRASEDET_DATASETS`` tree under ``root`` (about a second); returns ``root``."""
    _write_flickr30k_entities(root)
    _write_flickr30k(root)
    _write_coco(root)
    _write_vsepp(root)
    _write_referit(root)
    _write_visual_genome(root)
    _write_vgg19_features(root)
    _write_skip_thoughts(root)
    return root
