"""Generator -> files -> loaders reproduces the generator's own ground truth exactly."""
import json
import os

import pytest
from detectron2.data import DatasetCatalog, MetadataCatalog

from phrasedet.data.datasets import load_flickr30k_entities, load_referit
from phrasedet.data.statistics import bucket_statistics
from phrasedet.text.vocab import PhraseVocabulary

TEXT_KEYS = ("caption_index", "first_word_index", "phrase_raw", "phrase", "chain_id")


@pytest.fixture(scope="module")
def truth(builtin_root):
    with open(os.path.join(builtin_root, "ground_truth.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def flickr(builtin_root):
    ann_root = os.path.join(builtin_root, "flickr30k_entities")
    return {
        split: load_flickr30k_entities(
            ann_root, os.path.join(builtin_root, "flickr30k-images"), os.path.join(ann_root, f"{split}.txt"),
            os.path.join(ann_root, "UNRELATED_CAPTIONS"),
        )
        for split in ("train", "val", "test")
    }


def _truth_of(record, truth):
    return truth["images"][record["image_id"]]


def test_flickr_records_equal_ground_truth(flickr, truth):
    n = 0
    for split, records in flickr.items():
        for r in records:
            t = _truth_of(r, truth)
            assert t["split"] == split and (r["width"], r["height"]) == (t["width"], t["height"])
            assert r["captions"] == t["captions"] and r["unrelated_captions"] == t["unrelated_captions"]
            targets = [p for p in t["phrases"] if p["reason"] is None]
            assert [tuple(a[k] for k in TEXT_KEYS) + (a["phrase_types"], a["boxes"], a["bbox"]) for a in r["annotations"]] == [
                tuple(p[k] for k in TEXT_KEYS) + (p["types"], p["boxes"], p["union"]) for p in targets
            ]
            unboxed = [p for p in t["phrases"] if p["reason"] not in (None, "unrelated")]
            assert [tuple(u[k] for k in TEXT_KEYS) + (u["reason"],) for u in r["unboxed_phrases"]] == [
                tuple(p[k] for k in TEXT_KEYS) + (p["reason"],) for p in unboxed
            ]
            n += 1
    assert n == len(truth["images"])


def test_referit_records_equal_ground_truth(builtin_root, truth):
    for split in ("train", "test"):
        records = load_referit(os.path.join(builtin_root, "refclef"), os.path.join(builtin_root, "images", "saiapr_tc-12"), split)
        expected = {i: t for i, t in truth["images"].items() if t["split"] == split}
        assert sorted(r["image_id"] for r in records) == sorted(expected)
        for r in records:
            refs = expected[r["image_id"]]["refclef"]["refs"]
            want = [(s["raw"], s["phrase"], ref["box"]) for ref in refs for s in ref["sentences"]]
            assert sorted((a["phrase_raw"], a["phrase"], a["bbox"]) for a in r["annotations"]) == sorted(want)


def test_bucket_counts_are_as_designed(flickr, truth):
    vocab = PhraseVocabulary.from_dataset_dicts(flickr["train"])
    for phrase, row in truth["buckets"]["phrases"].items():
        assert (vocab.count(phrase), vocab.bucket(phrase)) == (row["train_count"], row["bucket"]), phrase
    got = bucket_statistics(flickr["test"], vocab)
    assert got == {b: {"phrases": s["phrases"], "instances": s["test_instances"]} for b, s in truth["buckets"]["summary"].items()}
    # the design: every bucket is populated in the test split, zero-shot phrases come from held-out combos
    assert got["zero_shot"]["phrases"] >= 5 and got["few_shot"]["phrases"] >= 10 and got["common"]["phrases"] >= 5
    held_out = {" ".join(c) for c in truth["parameters"]["held_out_combos"]}
    assert held_out & {p for p, r in truth["buckets"]["phrases"].items() if r["bucket"] == "zero_shot"}
    assert not held_out & set(vocab.phrases())


def test_builtin_names_load_through_the_catalog(flickr):
    test = DatasetCatalog.get("builtin_flickr30k_entities_test")
    assert [d["image_id"] for d in test] == [d["image_id"] for d in flickr["test"]]
    meta = MetadataCatalog.get("builtin_flickr30k_entities_test")
    assert meta.evaluator_type == "phrase_detection" and meta.train_dataset == "builtin_flickr30k_entities_train"
    assert len(DatasetCatalog.get("builtin_referit_val")) == 60
    again = DatasetCatalog.get("builtin_flickr30k_entities_test")  # parsed once per process
    assert again is not test and all(a is b for a, b in zip(again, test))


def test_missing_real_root_names_the_env_var(monkeypatch, tmp_path):
    monkeypatch.setenv("PHRASEDET_DATASETS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"Flickr30K Entities not found at .*flickr30k_entities.*PHRASEDET_DATASETS"):
        DatasetCatalog.get("flickr30k_entities_train")
    with pytest.raises(FileNotFoundError, match=r"ReferIt \(refclef\) not found.*PHRASEDET_DATASETS"):
        DatasetCatalog.get("referit_test")
