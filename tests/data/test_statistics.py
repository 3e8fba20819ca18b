"""split_statistics / bucket_statistics / training_vocabulary: counts describing loaded splits."""
import os

import pytest
from detectron2.data import DatasetCatalog

from phrasedet.data.datasets import load_flickr30k_entities
from phrasedet.data.statistics import bucket_statistics, split_statistics, training_vocabulary, unseen_word_statistics
from phrasedet.text.vocab import PhraseVocabulary

from .flickr_fixture import write_flickr_root


def test_counts_of_the_fixture_image(tmp_path):
    ann_root, image_root = write_flickr_root(str(tmp_path))
    dicts = load_flickr30k_entities(ann_root, image_root, os.path.join(ann_root, "train.txt"))
    # 8 <bndbox> objects; 10 box-target occurrences of 10 distinct phrases; 3 scene + 1 nobndbox
    assert split_statistics(dicts) == {
        "images": 1, "captions": 5, "boxes": 8, "instances": 10, "phrases": 10,
        "unboxed_scene": 3, "unboxed_nobox": 1,
    }
    vocab = PhraseVocabulary({"man": 101, "hands": 100, "two men": 1})
    assert bucket_statistics(dicts, vocab) == {
        "zero_shot": {"phrases": 7, "instances": 7},
        "few_shot": {"phrases": 2, "instances": 2},
        "common": {"phrases": 1, "instances": 1},
    }


def _image(phrases_boxes, captions=(), unrelated=(), unboxed_reasons=None):
    """A dataset dict: ``phrases_boxes`` is ``[(phrase, [box, ...]), ...]``; the keys ``captions``,
    ``unrelated_captions`` and ``unboxed_phrases`` are left out when not given (readers may omit them)."""
    d = {"annotations": [{"phrase": p, "boxes": [list(b) for b in boxes]} for p, boxes in phrases_boxes]}
    if captions:
        d["captions"] = list(captions)
    if unrelated:
        d["unrelated_captions"] = list(unrelated)
    if unboxed_reasons is not None:
        d["unboxed_phrases"] = [{"phrase": "x", "reason": r} for r in unboxed_reasons]
    return d


def test_counts_are_summed_over_images():
    box_a, box_b = (0, 0, 10, 10), (5, 5, 20, 20)
    dicts = [
        # 3 captions, 1 unrelated -> 2; 3 instances on 2 distinct boxes ("dog" and "animal" share box_a)
        _image([("dog", [box_a]), ("animal", [box_a]), ("cat", [box_b])],
               captions=["c1", "c2", "c3"], unrelated=[2], unboxed_reasons=["scene", "nobox"]),
        # 1 caption; 2 instances on 2 boxes (the same coordinates as image 1 count again: other image)
        _image([("dog", [box_a]), ("man", [box_a, box_b])], captions=["c4"], unboxed_reasons=["scene"]),
        # no captions, no unboxed_phrases key; 1 instance, 1 box
        _image([("tree", [box_b])]),
    ]
    assert split_statistics(dicts) == {
        "images": 3, "captions": 3, "instances": 6, "boxes": 5, "phrases": 5,
        "unboxed_scene": 2, "unboxed_nobox": 1,
    }


@pytest.fixture
def two_registered_datasets():
    names = ("_test_statistics_a", "_test_statistics_b")
    DatasetCatalog.register(names[0], lambda: [_image([("dog", [(0, 0, 1, 1)])] * 2)])
    DatasetCatalog.register(names[1], lambda: [_image([("dog", [(0, 0, 1, 1)]), ("cat", [(0, 0, 2, 2)])]), _image([])])
    yield names
    for name in names:
        DatasetCatalog.remove(name)


def test_training_vocabulary_counts_phrases_over_all_named_datasets(two_registered_datasets):
    vocab = training_vocabulary(two_registered_datasets, thresholds=[1, 2])
    assert vocab.counts == {"dog": 3, "cat": 1}
    assert vocab.thresholds == (1, 2)
    assert (vocab.bucket("cat"), vocab.bucket("dog")) == ("zero_shot", "common")
    assert training_vocabulary(two_registered_datasets[1:]).counts == {"dog": 1, "cat": 1}


def test_zero_shot_phrases_with_a_word_no_training_phrase_has():
    vocab = PhraseVocabulary({"red circle": 3, "blue square": 2})
    dicts = [{"annotations": [{"phrase": p} for p in ("red square", "red square", "green circle", "blue circle", "red circle")]}]
    # zero-shot: "red square" (2 instances, known words), "green circle" (new word "green"), "blue circle" (known words)
    assert unseen_word_statistics(dicts, vocab) == {"phrases": 3, "with_unseen_word": 1, "instances": 4,
                                                    "instances_with_unseen_word": 1, "unseen_words": ["green"]}
