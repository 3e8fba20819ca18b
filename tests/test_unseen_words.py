"""phrasedet/engine/comparison/unseen_words.py: the zero-shot bucket split into phrases with a word no training
phrase has and new combinations of known words, a partition of the run's zero-shot mAP."""
import glob
import json
import math
import os

import pytest

from phrasedet.engine.comparison.unseen_words import format_zero_shot_split, known_words, zero_shot_split

ROOT = os.path.join(os.path.dirname(__file__), "..")


def test_by_hand():
    known = known_words(["red circle", "small blue star", "circle"])
    assert known == {"red", "circle", "small", "blue", "star"}
    aps = [{"phrase": "blue circle", "bucket": "zero_shot", "ap": 40.0}, {"phrase": "vermilion circle", "bucket": "zero_shot", "ap": 10.0},
           {"phrase": "mauve star", "bucket": "zero_shot", "ap": 20.0}, {"phrase": "red circle", "bucket": "common", "ap": 90.0}]
    split = zero_shot_split(aps, known)
    assert split == {"unseen_word": 15.0, "phrases_unseen_word": 2, "seen_words": 40.0, "phrases_seen_words": 1}
    none = zero_shot_split(aps[:1], known)
    assert math.isnan(none["unseen_word"]) and none["phrases_unseen_word"] == 0
    table = format_zero_shot_split({"cite": [split, {**split, "unseen_word": 25.0}]})
    assert table.splitlines() == ["| model | zero-shot, a word unseen in training (2 phrases) | zero-shot, seen words only (1 phrases) |",
                                  "|---|---|---|", "| cite | 20.0 ± 7.1 | 40.0 ± 0.0 |"]
    assert format_zero_shot_split({}) == "(no run)"


def test_on_the_project_s_records_the_two_parts_make_up_the_zero_shot_map():
    from phrasedet.data.statistics import training_vocabulary

    known = known_words(training_vocabulary(["builtin_flickr30k_entities_train"]).phrases())
    checked = 0
    for results in glob.glob(os.path.join(ROOT, "results", "phrase_detection_compare", "detector*", "seed*", "*", "results.json")):
        run = os.path.dirname(results)
        found = sorted(glob.glob(os.path.join(run, "stage3*", "inference", "builtin_flickr30k_entities_test", "phrase_aps.json")))
        if not found:  # a filtered evaluation: no per-phrase file
            continue
        tested = json.load(open(results))["results"]["phrase_detection"]
        split = zero_shot_split(json.load(open(found[-1])), known)  # the last phase's: stage3b_ sorts after stage3_
        n1, n2 = split["phrases_unseen_word"], split["phrases_seen_words"]
        assert (n1, n2) == (1, 45), run  # version 3: "four" is the one unseen word
        assert (n1 * split["unseen_word"] + n2 * split["seen_words"]) / (n1 + n2) == pytest.approx(tested["mAP_zero_shot"]), run
        checked += 1
    assert checked >= 40, checked
