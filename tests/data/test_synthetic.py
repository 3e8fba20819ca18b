"""Tests of the built-in synthetic dataset generator (files and ground truth, no loaders)."""
import filecmp
import json
import logging
import os
import pickle
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict

import pytest
from PIL import Image

from phrasedet.data.synthetic import (HELD_OUT_COMBOS, RARE_COMBOS, ensure_builtin_dataset,
                                      generate_builtin_dataset)
from phrasedet.data.synthetic import builtin as builtin_mod
from phrasedet.text import normalize_phrase
from phrasedet.text.vocab import bucket_of_count
from ..tool_runs import tool_path

SMALL = dict(num_train=40, num_val=5, num_test=15)
PHRASE_RE = re.compile(r"\[/EN#(\d+)((?:/[a-z]+)+) ([^\[\]]+)\]")
TYPES = {"people", "clothing", "bodyparts", "animals", "vehicles", "instruments", "scene", "other",
         "notvisual"}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("builtin") / "root")
    summary = generate_builtin_dataset(root, seed=0, **SMALL)
    with open(os.path.join(root, "ground_truth.json"), encoding="utf-8") as f:
        truth = json.load(f)
    return root, summary, truth


def _flickr(root, *parts):
    return os.path.join(root, "flickr30k_entities", *parts)


def _xml_chains(path):
    """chain id -> list of 0-based continuous boxes, plus the set of scene / nobox chain ids."""
    boxes, scene, nobox = defaultdict(list), set(), set()
    for obj in ET.parse(path).getroot().findall("object"):
        bb = obj.find("bndbox")
        for name in obj.findall("name"):
            if bb is not None:
                x1, y1, x2, y2 = (int(bb.find(k).text) for k in ("xmin", "ymin", "xmax", "ymax"))
                boxes[name.text].append([x1 - 1.0, y1 - 1.0, float(x2), float(y2)])
            elif obj.find("scene").text == "1":
                scene.add(name.text)
            else:
                nobox.add(name.text)
    return boxes, scene, nobox


def test_layout_and_splits(small):
    root, summary, truth = small
    for rel in ("flickr30k_entities/train.txt", "flickr30k_entities/val.txt",
                "flickr30k_entities/test.txt", "flickr30k_entities/UNRELATED_CAPTIONS",
                "refclef/instances.json", "refclef/refs(berkeley).p", "refclef/refs(unc).p",
                "ground_truth.json"):
        assert os.path.isfile(os.path.join(root, rel)), rel
    ids = {}
    for split, n in (("train", 40), ("val", 5), ("test", 15)):
        with open(_flickr(root, f"{split}.txt")) as f:
            ids[split] = f.read().split()
        assert len(ids[split]) == n
        assert all(truth["images"][i]["split"] == split for i in ids[split])
    everything = sum(ids.values(), [])
    assert len(set(everything)) == 60 and set(everything) == set(truth["images"])
    assert all(re.fullmatch(r"[1-9]\d{6,8}", i) for i in everything)
    assert summary["images"] == 60 and summary["splits"]["test"]["images"] == 15
    for image_id, im in truth["images"].items():
        with Image.open(os.path.join(root, im["file_name"])) as img:
            assert img.format == "JPEG" and img.size == (im["width"], im["height"])
            assert max(img.size) == 128 and min(img.size) >= 96


def test_determinism(small, tmp_path):
    root, _, _ = small
    again, other = str(tmp_path / "again"), str(tmp_path / "other")
    generate_builtin_dataset(again, seed=0, **SMALL)
    generate_builtin_dataset(other, seed=1, **SMALL)
    with open(_flickr(root, "test.txt")) as f:
        some = f.read().split()[:3]
    files = ["ground_truth.json", "refclef/instances.json", "refclef/refs(berkeley).p",
             "flickr30k_entities/train.txt", "flickr30k_entities/UNRELATED_CAPTIONS"]
    for i in some:
        files += [f"flickr30k_entities/Sentences/{i}.txt", f"flickr30k_entities/Annotations/{i}.xml",
                  f"flickr30k-images/{i}.jpg"]
    for rel in files:
        assert filecmp.cmp(os.path.join(root, rel), os.path.join(again, rel), shallow=False), rel
    assert not filecmp.cmp(os.path.join(root, "ground_truth.json"),
                           os.path.join(other, "ground_truth.json"), shallow=False)


def test_xml_structure(small):
    root, _, truth = small
    for image_id, im in truth["images"].items():
        ann = ET.parse(_flickr(root, "Annotations", f"{image_id}.xml")).getroot()
        assert ann.tag == "annotation" and ann.find("filename").text == f"{image_id}.jpg"
        size = ann.find("size")
        assert int(size.find("width").text) == im["width"]
        assert int(size.find("height").text) == im["height"]
        assert size.find("depth").text == "3"
        objects = ann.findall("object")
        assert objects
        for obj in objects:
            names = obj.findall("name")
            assert names and all(n.text.isdigit() and n.text != "0" for n in names)
            bb = obj.find("bndbox")
            if bb is not None:
                x1, y1, x2, y2 = (int(bb.find(k).text) for k in ("xmin", "ymin", "xmax", "ymax"))
                assert 1 <= x1 < x2 <= im["width"] and 1 <= y1 < y2 <= im["height"]
                assert obj.find("nobndbox") is None
            else:
                flags = (obj.find("nobndbox").text, obj.find("scene").text)
                assert flags in (("0", "1"), ("1", "0"))


def test_sentences_markup_and_truth(small):
    root, _, truth = small
    seen_chains = {}
    for image_id, im in truth["images"].items():
        with open(_flickr(root, "Sentences", f"{image_id}.txt"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        assert len(lines) == 5 and all(lines)
        boxes, scene, nobox = _xml_chains(_flickr(root, "Annotations", f"{image_id}.xml"))
        mentioned = set()
        gt = iter(im["phrases"])
        for ci, line in enumerate(lines):
            depth = 0
            for ch in line:
                depth += {"[": 1, "]": -1}.get(ch, 0)
                assert depth in (0, 1), line
            assert depth == 0
            assert line.count("[") == len(PHRASE_RE.findall(line))
            stripped = PHRASE_RE.sub(lambda m: m.group(3), line)
            assert "[" not in stripped and "/EN#" not in stripped
            assert " ".join(stripped.split()) == im["captions"][ci]
            words = im["captions"][ci].split()
            for m in PHRASE_RE.finditer(line):
                cid, types = m.group(1), m.group(2).strip("/").split("/")
                assert set(types) <= TYPES
                assert (cid == "0") == ("notvisual" in types)
                p = next(gt)
                assert (p["caption_index"], p["chain_id"], p["phrase_raw"], p["types"]) == (
                    ci, cid, m.group(3), types)
                n = len(p["phrase_raw"].split())
                assert words[p["first_word_index"]:p["first_word_index"] + n] == p["phrase_raw"].split()
                assert p["phrase"] == normalize_phrase(p["phrase_raw"])
                if cid == "0":
                    assert p["reason"] == "notvisual"
                    continue
                mentioned.add(cid)
                assert cid in boxes or cid in scene or cid in nobox, (image_id, cid)
                assert seen_chains.setdefault(cid, image_id) == image_id  # globally unique ids
                if p["reason"] is None:
                    assert p["boxes"] == boxes[cid] and p["boxes"]
                    u = p["union"]
                    assert u == [min(b[0] for b in p["boxes"]), min(b[1] for b in p["boxes"]),
                                 max(b[2] for b in p["boxes"]), max(b[3] for b in p["boxes"])]
                else:
                    assert p["boxes"] == [] and p["union"] is None and cid not in boxes
                    assert p["reason"] in ("scene", "nobox", "unrelated")
                    if p["reason"] == "scene":
                        assert cid in scene
                    else:
                        assert cid in nobox
        assert next(gt, None) is None
        assert mentioned == set(boxes) | scene | nobox


def test_phrase_kinds_present(small):
    _, summary, truth = small
    phrases = [p for im in truth["images"].values() for p in im["phrases"]]
    reasons = Counter(p["reason"] for p in phrases)
    assert reasons[None] > 0 and all(reasons[r] > 0 for r in ("notvisual", "scene", "nobox", "unrelated"))
    assert any(len(p["boxes"]) > 1 for p in phrases)  # "two red circles"
    assert summary["shared_boxes"] > 0 and summary["multi_box_chains"] > 0
    # coreference: some chain is mentioned in several captions with different wordings
    by_chain = defaultdict(set)
    for p in phrases:
        if p["reason"] is None:
            by_chain[p["chain_id"]].add(p["phrase_raw"].lower())
    assert max(len(v) for v in by_chain.values()) >= 3


def test_objects_clean(small):
    _, _, truth = small
    for im in truth["images"].values():
        objs = im["objects"]
        assert 2 <= len(objs) <= 4
        for k, o in enumerate(objs):
            x1, y1, x2, y2 = o["box"]
            assert max(x2 - x1, y2 - y1) >= 12 and 0 <= x1 and x2 <= im["width"] and y2 <= im["height"]
            assert o["size"] == ("small" if max(x2 - x1, y2 - y1) <= 24 else "large")
            for q in objs[k + 1:]:
                a, b = o["box"], q["box"]
                iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
                ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
                assert iw * ih == 0.0


def test_unrelated_captions(small):
    root, summary, truth = small
    with open(_flickr(root, "UNRELATED_CAPTIONS")) as f:
        lines = f.read().splitlines()
    assert lines[0] == "# format: <imageID> <sentence number>"
    entries = [tuple(line.split()) for line in lines[1:]]
    assert entries and len(entries) == summary["unrelated_captions"]
    expected = [(i, str(k + 1)) for i, im in truth["images"].items() for k in im["unrelated_captions"]]
    assert entries == expected
    for image_id, num in entries:
        im = truth["images"][image_id]
        ps = [p for p in im["phrases"] if p["caption_index"] == int(num) - 1]
        assert ps and all(p["reason"] == "unrelated" for p in ps)


def test_refclef(small):
    root, _, truth = small
    with open(os.path.join(root, "refclef", "instances.json")) as f:
        inst = json.load(f)
    anns = {a["id"]: a for a in inst["annotations"]}
    images = {im["id"]: im for im in inst["images"]}
    cats = {c["id"]: c["name"] for c in inst["categories"]}
    assert len(cats) == 6 and len(images) == 60
    for split_by in ("berkeley", "unc"):
        with open(os.path.join(root, "refclef", f"refs({split_by}).p"), "rb") as f:
            refs = pickle.load(f, encoding="latin1")
        assert isinstance(refs, list)
        by_image = defaultdict(list)
        for r in refs:
            by_image[str(r["image_id"])].append(r)
        assert set(by_image) == set(truth["images"])
        for image_id, im in truth["images"].items():
            got = by_image[image_id]
            gt_refs = im["refclef"]["refs"]
            assert len(got) == len(gt_refs) == len(im["objects"])
            for r, g in zip(got, gt_refs):
                assert r["split"] == im["split"] and r["ref_id"] == g["ref_id"]
                ann = anns[r["ann_id"]]
                assert ann["image_id"] == r["image_id"] and ann["bbox"] == g["bbox"]
                x, y, w, h = ann["bbox"]
                assert [x, y, x + w, y + h] == g["box"] == im["objects"][g["object_index"]]["box"]
                assert cats[r["category_id"]] == im["objects"][g["object_index"]]["shape"]
                assert 1 <= len(r["sentences"]) <= 3
                assert r["sent_ids"] == [s["sent_id"] for s in r["sentences"]]
                for s, gs in zip(r["sentences"], g["sentences"]):
                    assert s["raw"] == gs["raw"] and s["tokens"] == s["sent"].split()
            meta = images[int(image_id)]
            assert (meta["height"], meta["width"]) == (im["height"], im["width"])
            path = os.path.join(root, im["refclef"]["file_name"])
            assert path.endswith(f"/{int(image_id) // 1000 % 100:02d}/images/{image_id}.jpg")
            assert filecmp.cmp(path, os.path.join(root, im["file_name"]), shallow=False)


def test_held_out_and_rare_small(small):
    _, _, truth = small
    train = Counter((o["colour"], o["shape"]) for im in truth["images"].values()
                    if im["split"] == "train" for o in im["objects"])
    assert not any(train[tuple(c)] for c in HELD_OUT_COMBOS)
    quota = truth["parameters"]["rare_train_quota"]
    assert all(train[tuple(c)] == quota for c in RARE_COMBOS)


def test_ensure_builtin_dataset(tmp_path, monkeypatch, caplog):
    cache = str(tmp_path / "cache")
    calls = []
    real = builtin_mod.generate_builtin_dataset

    def failing(root, **kw):
        os.makedirs(os.path.join(root, "flickr30k_entities"))
        raise RuntimeError("crash")

    monkeypatch.setattr(builtin_mod, "generate_builtin_dataset", failing)
    with pytest.raises(RuntimeError):
        ensure_builtin_dataset(cache, seed=3, **SMALL)
    assert [n for n in os.listdir(cache) if not n.endswith(".lock")] == []  # nothing half-written

    monkeypatch.setattr(builtin_mod, "generate_builtin_dataset",
                        lambda root, **kw: calls.append(root) or real(root, **kw))
    with caplog.at_level(logging.INFO, logger="phrasedet.data"):
        root = ensure_builtin_dataset(cache, seed=3, **SMALL)
    assert os.path.basename(root) == "builtin-v%d-seed3-n40-5-15" % builtin_mod.GENERATOR_VERSION
    assert "generating built-in dataset into" in caplog.text and len(calls) == 1
    gt = os.path.join(root, "ground_truth.json")
    mtime = os.stat(gt).st_mtime_ns
    assert ensure_builtin_dataset(cache, seed=3, **SMALL) == root
    assert len(calls) == 1 and os.stat(gt).st_mtime_ns == mtime
    assert sorted(n for n in os.listdir(cache) if not n.endswith(".lock")) == [os.path.basename(root)]

    monkeypatch.setenv("PHRASEDET_CACHE", cache)
    assert ensure_builtin_dataset(seed=3, **SMALL) == root and len(calls) == 1


def test_cli(tmp_path, capsys):
    sys.path.insert(0, os.path.dirname(tool_path("make_builtin_dataset.py")))
    try:
        import make_builtin_dataset
    finally:
        sys.path.pop(0)
    rc = make_builtin_dataset.main(["--root", str(tmp_path / "d"), "--seed", "2", "--num-train", "6",
                                    "--num-val", "2", "--num-test", "3"])
    out = capsys.readouterr().out
    assert rc == 0 and "images 11" in out and "zero_shot" in out
    assert os.path.isfile(tmp_path / "d" / "ground_truth.json")


def test_default_bucket_design(tmp_path):
    """At the default sizes every bucket has several test phrases, by construction."""
    summary = generate_builtin_dataset(str(tmp_path / "default"), seed=0)
    with open(tmp_path / "default" / "ground_truth.json", encoding="utf-8") as f:
        truth = json.load(f)
    assert summary["splits"]["train"]["images"] == 600
    b = summary["buckets"]
    assert b["zero_shot"]["phrases"] >= 5 and b["few_shot"]["phrases"] >= 10 and b["common"]["phrases"] >= 5
    assert all(v["test_instances"] >= v["phrases"] for v in b.values())
    table = truth["buckets"]["phrases"]
    for phrase, row in table.items():
        assert row["bucket"] == bucket_of_count(row["train_count"])
        if row["design"] == "held_out":
            assert row["train_count"] == 0
    for colour, shape in HELD_OUT_COMBOS:
        assert table.get(f"{colour} {shape}", {"bucket": "zero_shot"})["bucket"] == "zero_shot"
    for colour, shape in RARE_COMBOS:
        assert table.get(f"{colour} {shape}", {"bucket": "few_shot"})["bucket"] == "few_shot"
    train_objects = Counter((o["colour"], o["shape"]) for im in truth["images"].values()
                            if im["split"] == "train" for o in im["objects"])
    assert not any(train_objects[tuple(c)] for c in HELD_OUT_COMBOS)
    assert sum(row["train_count"] > 100 for row in table.values()) >= 5
    held = {f"{c} {s}" for c, s in HELD_OUT_COMBOS}
    assert sum(p in held for p in table) >= 5  # zero-shot phrases by construction


@pytest.mark.parametrize("language", ["v3", "long_tail"])
def test_a_bare_shape_name_refers_only_to_a_shape_alone_in_its_image(language):
    """On 300 planned scenes: an expression that is nothing but a shape's name ("circle", "disc")
    is offered for an object only when no other object of the image has its shape."""
    import numpy as np

    from phrasedet.data.synthetic.captions import referring_expressions
    from phrasedet.data.synthetic.language import get_language
    from phrasedet.data.synthetic.scene import plan_scene

    lang = get_language(language)
    names = {n: shape for shape, ns in lang.shapes.items() for n in ns.names}
    rng = np.random.default_rng(0)
    namer = lang.namer(np.random.default_rng(1) if language != "v3" else None, "test")
    bare = {True: 0, False: 0}  # by whether the shape is alone in the image
    shared = 0
    for _ in range(300):
        scene = plan_scene(rng, "test")
        for i, o in enumerate(scene.objects):
            alone = sum(x.shape == o.shape for x in scene.objects) == 1
            shared += not alone
            for expression in referring_expressions(scene, i, rng, namer):
                if expression in names:
                    assert names[expression] == o.shape
                    bare[alone] += 1
    assert bare[False] == 0 and bare[True] > 50 and shared > 100, (bare, shared)
