import os

from phrasedet.data.datasets import load_flickr30k_entities
from phrasedet.data.statistics import bucket_statistics, split_statistics
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
