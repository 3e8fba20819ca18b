"""The facts a built-in caption states and the specificity measure built on them, on hand-made
scenes and captions (phrasedet/data/synthetic/facts.py, specificity.py)."""
import json
import math
import os
import shutil
import warnings
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phrasedet.data.datasets.common import BadAnnotationError
from phrasedet.data.synthetic import generate_builtin_dataset
from phrasedet.data.synthetic import facts as facts_module
from phrasedet.data.synthetic.facts import (ATTRIBUTES, RELATIONS, FactIndex, canonical_desc, caption_facts,
                                            caption_true_of, holds, object_descs, relations_between)
from phrasedet.data.synthetic.specificity import (IndexDisagreement, _read_split, dataset_specificity,
                                                  format_specificity, in_batch_chance, split_specificity,
                                                  true_of_brute_force)

from . import independent_specificity
from ..tool_runs import tool_path


def obj(colour, shape, size="small", position="left", box=(0, 0, 20, 20)):
    return {"colour": colour, "shape": shape, "size": size, "position": position, "box": list(box)}


def d(**kw):
    return tuple(sorted(kw.items()))


# Three scenes: 0 has a small red circle on the left of a large blue square, 1 two red circles,
# 2 a red circle far from a blue square, above it.
SCENES = [
    {"background": "gray", "objects": [obj("red", "circle", box=(0, 40, 20, 60)),
                                       obj("blue", "square", "large", "right", box=(90, 30, 120, 60))]},
    {"background": "teal", "objects": [obj("red", "circle", box=(0, 0, 20, 20)),
                                       obj("red", "circle", "large", "right", box=(90, 0, 120, 30))]},
    {"background": "gray", "objects": [obj("red", "circle", "small", "top", box=(50, 0, 70, 20)),
                                       obj("blue", "square", "large", "bottom", box=(50, 80, 80, 110))]},
]


def test_a_caption_states_its_phrases_words_and_the_places_said_after_them():
    line = ("[/EN#1/other A small red circle] on the left is next to [/EN#2/other the blue square] "
            "on [/EN#3/scene a gray background] .")
    assert caption_facts(line) == (
        ("background", "gray"),
        ("object", d(colour="blue", shape="square")),
        ("object", d(colour="red", position="left", shape="circle", size="small")),
        ("relation", d(colour="red", position="left", shape="circle", size="small"), "next to",
         d(colour="blue", shape="square")),
    )


def test_a_place_after_the_background_belongs_to_the_object_before_it():
    line = "[/EN#1/other The star] sits on [/EN#3/scene the pink backdrop] at the bottom ."
    assert caption_facts(line) == (("background", "pink"), ("object", d(position="bottom", shape="star")))


@pytest.mark.parametrize("words, fact", [
    ("two red circles", ("count", d(colour="red", shape="circle"), 2)),
    ("the three blue shapes", ("count", d(colour="blue"), 3)),
    ("four objects", ("count", (), 4)),
    ("the red shapes", ("at_least", d(colour="red"), 2)),
    ("the crosses", ("at_least", d(shape="cross"), 2)),
    ("a large green object", ("object", d(colour="green", size="large"))),
    ("the big diamond", ("object", d(shape="diamond", size="large"))),
])
def test_phrase_words(words, fact):
    assert caption_facts(f"[/EN#5/other {words}] are shown .") == (fact,)


def test_groups_are_never_placed_or_related():
    line = "[/EN#1/other Two circles] on the left are left of [/EN#2/other a square] ."
    assert caption_facts(line) == (("count", d(shape="circle"), 2), ("object", d(shape="square")))


def test_phrases_that_state_nothing():
    assert caption_facts("[/EN#0/notvisual This picture] shows [/EN#4/other a soft shadow] .") == ()
    assert caption_facts("[/EN#7/people A man] rides [/EN#8/vehicles a bicycle] down [/EN#9/scene the street] .") == ()
    assert caption_facts("A circle is on the left .") == ()  # no phrase: nothing is an object


@pytest.mark.parametrize("rel", ["left of", "right of", "above", "below", "next to"])
def test_every_relation_word(rel):
    line = f"[/EN#1/other A circle] is {rel} [/EN#2/other a star] ."
    assert ("relation", d(shape="circle"), rel, d(shape="star")) in caption_facts(line)


def test_a_bad_markup_line_names_its_place():
    with pytest.raises(BadAnnotationError, match=r"^Sentences/9\.txt:2: '\[' at column 1 is never closed"):
        caption_facts("[/EN#1/other a circle", "Sentences/9.txt:2")
    with pytest.raises(BadAnnotationError) as error:
        caption_facts("[/EN#1/other a circle")
    assert str(error.value) == "<caption>: '[' at column 1 is never closed"


def test_a_colour_without_a_noun_is_an_object_and_punctuation_is_stripped():
    assert caption_facts("[/EN#1/other The red] is shown .") == (("object", d(colour="red")),)
    assert caption_facts("There is [/EN#1/other a red circle] on the left.") == (
        ("object", d(colour="red", position="left", shape="circle")),)
    # the first position said after an object places it
    assert caption_facts("There is [/EN#1/other a red circle] on the left at the top .") == (
        ("object", d(colour="red", position="left", shape="circle")),)


@pytest.mark.parametrize("box_b, expected", [
    ((30, 0, 40, 10), {"left of"}),                 # centres 35 px apart in x, boxes 20 px apart
    ((-40, 0, -30, 10), {"right of"}),
    ((0, 30, 10, 40), {"above"}),
    ((0, -30, 10, -20), {"below"}),
    ((10, 0, 20, 10), {"left of", "next to"}),      # touching: gap 0
    ((22, 0, 32, 10), {"left of", "next to"}),      # gap exactly 12: next to
    ((22.5, 0, 32.5, 10), {"left of"}),             # gap 12.5
    ((12, 12, 22, 22), {"left of", "next to"}),     # a diagonal tie goes to x
])
def test_relations_between(box_b, expected):
    assert relations_between((0, 0, 10, 10), box_b) == expected


@pytest.mark.parametrize("box_b, expected", [
    ((100, 52, 140, 62), {"above", "next to"}),     # centres 12 px apart in y, gap 2
    ((60, 40, 85, 50), {"right of"}),               # gap 15 in x
    ((152, 40, 170, 50), {"left of", "next to"}),   # gap exactly 12 in x
])
def test_relations_between_a_wide_box_away_from_the_origin(box_b, expected):
    """x and y, left and right edges told apart: box a is 40 x 10 at (100, 40)."""
    assert relations_between((100, 40, 140, 50), box_b) == expected


def test_offset_boundary_is_inclusive():
    assert relations_between((0, 0, 10, 10), (10, 0, 20, 10)) == {"left of", "next to"}  # exactly 10 px
    assert relations_between((0, 0, 10, 10), (0, 9.99, 10, 19.99)) == {"next to"}  # 9.99 px: no above


def test_holds_on_hand_scenes():
    s0, s1, s2 = SCENES
    assert holds(("background", "gray"), s0) and not holds(("background", "gray"), s1)
    assert holds(("object", d(colour="red", shape="circle", position="left")), s0)
    assert not holds(("object", d(colour="red", shape="circle", size="large")), s0)
    assert holds(("count", d(colour="red"), 2), s1) and not holds(("count", d(colour="red"), 1), s1)
    assert holds(("count", d(colour="green"), 0), s0)
    assert holds(("at_least", d(shape="circle"), 2), s1) and not holds(("at_least", d(shape="circle"), 2), s0)
    left = ("relation", d(colour="red"), "left of", d(shape="square"))
    assert holds(left, s0) and not holds(left, s2) and not holds(left, s1)
    assert holds(("relation", d(colour="red"), "above", d(shape="square")), s2)
    # one object never relates to itself
    assert not holds(("relation", d(shape="circle"), "next to", d(shape="circle")), s0)
    with pytest.raises(ValueError, match="unknown fact kind 'colour'"):
        holds(("colour", "red"), s0)


def test_a_caption_is_true_when_all_its_facts_are():
    facts = (("background", "gray"), ("object", d(colour="red", shape="circle")))
    assert [caption_true_of(facts, s) for s in SCENES] == [True, False, True]
    assert all(caption_true_of((), s) for s in SCENES)


def test_index_finds_what_brute_force_finds():
    """Random scenes and every fact kind: the index's answer is the brute-force one."""
    rng = np.random.default_rng(0)
    colours, shapes = ("red", "blue", "green"), ("circle", "square", "star")
    scenes = []
    for _ in range(40):
        objects = []
        for _ in range(int(rng.integers(1, 5))):
            x, y = rng.uniform(0, 100, 2)
            objects.append(obj(str(rng.choice(colours)), str(rng.choice(shapes)), str(rng.choice(["small", "large"])),
                               str(rng.choice(["left", "top", "center"])), (x, y, x + 15, y + 15)))
        scenes.append({"background": str(rng.choice(["gray", "teal"])), "objects": objects})
    index = FactIndex(scenes)
    descs = [(), d(colour="red"), d(colour="blue", shape="star"), d(shape="circle", size="small"),
             d(colour="green", position="left"), d(position="left", shape="circle"), d(position="top", size="small"),
             d(colour="red", position="center", shape="square", size="large"), d(position="left")]
    facts = ([("background", "gray")] + [("object", x) for x in descs] + [("count", x, n) for x in descs for n in (0, 1, 2)]
             + [("at_least", x, 2) for x in descs]
             + [("relation", a, r, b) for a, b in product(descs, descs) for r in ("left of", "next to")])
    for k in range(300):
        chosen = [facts[int(i)] for i in rng.choice(len(facts), size=int(rng.integers(1, 4)), replace=False)]
        exclude = int(rng.integers(40)) if k % 2 else None
        expected = [i for i, s in enumerate(scenes) if i != exclude and caption_true_of(chosen, s)]
        assert index.true_of(chosen, exclude=exclude) == expected, chosen


def test_an_object_is_indexed_under_every_desc_it_matches_in_the_form_captions_use():
    o = obj("red", "circle", "small", "left")
    descs = object_descs(o)
    assert len(descs) == len(set(descs)) == 16 and all(d_ == canonical_desc(d_) for d_ in descs)
    # the form caption_facts gives "[a small red circle] on the left": position before shape and size
    placed = caption_facts("[/EN#1/other A small red circle] on the left .")[0][1]
    assert placed == (("colour", "red"), ("position", "left"), ("shape", "circle"), ("size", "small"))
    assert placed in descs and d(position="left", shape="circle") in descs
    assert canonical_desc([("shape", "circle"), ("position", "left"), ("shape", "circle")]) == \
        (("position", "left"), ("shape", "circle"))


def test_a_placed_shape_finds_its_scene():
    """The case the first index missed: a position with a shape (or a size) named."""
    index = FactIndex(SCENES)
    assert index.true_of(caption_facts("[/EN#1/other The circle] on the left .")) == [0, 1]
    assert index.true_of(caption_facts("[/EN#1/other A large square] at the bottom .")) == [2]
    # a desc given in another order names the same objects
    assert index.true_of([("object", (("shape", "circle"), ("position", "top")))]) == [2]


_COLOURS, _SHAPES, _SIZES, _PLACES = ("red", "blue"), ("circle", "star"), ("small", "large"), ("left", "top", "center")
_VALUES = {"colour": _COLOURS, "shape": _SHAPES, "size": _SIZES, "position": _PLACES}


@st.composite
def _scenes(draw):
    scenes = []
    for _ in range(draw(st.integers(1, 12))):
        objects = []
        for _ in range(draw(st.integers(0, 4))):
            x, y = draw(st.integers(0, 90)), draw(st.integers(0, 90))
            w = draw(st.integers(5, 30))
            objects.append(obj(*(draw(st.sampled_from(_VALUES[a])) for a in ("colour", "shape", "size", "position")),
                               box=(x, y, x + w, y + w)))
        scenes.append({"background": draw(st.sampled_from(("gray", "teal"))), "objects": objects})
    return scenes


@st.composite
def _desc_any_order(draw):
    """A desc over any subset of the four attributes, its pairs in any order (canonical or not)."""
    names = draw(st.lists(st.sampled_from(ATTRIBUTES), unique=True, max_size=4))
    return tuple(draw(st.permutations([(a, draw(st.sampled_from(_VALUES[a]))) for a in names])))


_fact = st.one_of(
    st.tuples(st.just("background"), st.sampled_from(("gray", "teal"))),
    st.tuples(st.just("object"), _desc_any_order()),
    st.tuples(st.just("count"), _desc_any_order(), st.integers(0, 3)),
    st.tuples(st.just("at_least"), _desc_any_order(), st.integers(1, 3)),
    st.tuples(st.just("relation"), _desc_any_order(), st.sampled_from(RELATIONS), _desc_any_order()),
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(scenes=_scenes(), facts=st.lists(_fact, min_size=0, max_size=4), data=st.data())
def test_the_index_answers_as_brute_force_for_any_scenes_and_facts(scenes, facts, data):
    exclude = data.draw(st.one_of(st.none(), st.integers(0, len(scenes) - 1)))
    assert FactIndex(scenes).true_of(facts, exclude=exclude) == true_of_brute_force(facts, scenes, exclude)
    # the prefilter is exact: a scene is a candidate when it has the background and an object
    # matching each object desc the facts name, whichever order the desc's pairs come in
    needed = []
    for f in facts:
        if f[0] == "background":
            needed.append(f)
        elif f[0] == "relation":
            needed += [("object", f[1]), ("object", f[3])]
        elif f[0] == "object" or f[2] > 0:
            needed.append(("object", f[1]))
    expected = sum(1 << i for i, scene in enumerate(scenes) if all(caption_true_of((n,), scene) for n in needed))
    assert FactIndex(scenes).candidates(facts) == expected


@pytest.mark.parametrize("k, n, batch, expected", [
    (1, 5, 3, (0.5, 0.5)),              # b = 2 of 4 others: 1 - C(3,2)/C(4,2) = 1 - 3/6
    (2, 5, 3, (1.0, 1 - 1 / 6)),        # 1 - C(2,2)/C(4,2)
    (3, 5, 3, (1.5, 1.0)),              # C(1,2) = 0
    (0, 5, 3, (0.0, 0.0)),
    (2, 5, 64, (2.0, 1.0)),             # the batch is the whole split
    (1, 1, 64, (0.0, 0.0)),             # no other image
    (1, 600, 64, (63 / 599, 63 / 599)),  # one other: the chance it is drawn
])
def test_in_batch_chance(k, n, batch, expected):
    got = in_batch_chance(k, n, batch)
    assert got == pytest.approx(expected, abs=1e-12)


def test_split_specificity_by_hand():
    gray_red_circle = (("background", "gray"), ("object", d(colour="red", shape="circle")))
    red_circle = (("object", d(colour="red", shape="circle")),)
    two_red = (("count", d(colour="red"), 2),)
    captions = [[gray_red_circle, red_circle, None], [two_red], [gray_red_circle]]
    m = split_specificity(SCENES, captions, batch_size=2)
    # k = 1 (scene 2), 2, 0, 1 (scene 0); b = 1 of n - 1 = 2 others
    assert m["captions"] == 4 and m["left_out"] == 1 and m["images"] == 3 and m["batch_size"] == 2
    assert m["mean_in_split"] == pytest.approx((1 + 2 + 0 + 1) / 4)
    assert m["share_in_split"] == pytest.approx(3 / 4) and m["max_in_split"] == 2
    assert m["mean_in_batch"] == pytest.approx((0.5 + 1.0 + 0 + 0.5) / 4)
    assert m["share_in_batch"] == pytest.approx((0.5 + 1.0 + 0 + 0.5) / 4)


def test_split_without_captions():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "mean of empty slice" warning: the figures are NaN by design
        m = split_specificity(SCENES, [[None, None], [], [None]])
    assert m["captions"] == 0 and m["left_out"] == 3 and math.isnan(m["mean_in_batch"]) and m["max_in_split"] == 0
    assert m["batch_size"] == 64  # the default B


def test_format_specificity_word_for_word():
    m = {"images": 3, "captions": 4, "left_out": 1, "batch_size": 2, "mean_in_batch": 0.5, "share_in_batch": 0.25,
         "mean_in_split": 1.0, "share_in_split": 0.75, "max_in_split": 2}
    assert format_specificity({"train": m, "val": {**m, "images": 5}}) == (
        "| split | images | captions (unrelated left out) | other images per caption, batch of B | captions with any, "
        "batch of B | other images per caption, whole split | captions with any, whole split | most others |\n"
        "|---|---|---|---|---|---|---|---|\n"
        "| train | 3 | 4 (1) | 0.500 (B = 2) | 25.0 % | 1.000 | 75.0 % | 2 |\n"
        "| val | 5 | 4 (1) | 0.500 (B = 2) | 25.0 % | 1.000 | 75.0 % | 2 |")


@pytest.fixture(scope="module")
def small_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("spec") / "root")
    generate_builtin_dataset(root, seed=0, num_train=40, num_val=8, num_test=15)
    return root


def _truth(root):
    with open(os.path.join(root, "ground_truth.json"), encoding="utf-8") as f:
        return json.load(f)["images"]


def test_generated_captions_are_true_of_their_own_image(small_root):
    images, checked = _truth(small_root), 0
    for image_id, im in images.items():
        with open(os.path.join(small_root, "flickr30k_entities", "Sentences", f"{image_id}.txt"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        for c, line in enumerate(lines):
            facts = caption_facts(line)
            if c in im["unrelated_captions"]:
                assert facts == ()
                continue
            assert facts and caption_true_of(facts, im), line
            checked += 1
    assert checked == 5 * len(images) - sum(len(im["unrelated_captions"]) for im in images.values())


def test_the_index_finds_what_brute_force_finds_for_every_generated_caption(small_root):
    images, checked = _truth(small_root), 0
    for split in ("train", "val", "test"):
        scenes, captions, ids = _read_split(small_root, images, split)
        index = FactIndex(scenes)
        for i, facts_of_image in enumerate(captions):
            for facts in facts_of_image:
                if facts is not None:
                    assert index.true_of(facts, exclude=i) == true_of_brute_force(facts, scenes, i), (ids[i], facts)
                    assert index.true_of(facts) == true_of_brute_force(facts, scenes)
                    checked += 1
    assert checked == 5 * 63 - sum(len(im["unrelated_captions"]) for im in images.values())


def test_a_blind_index_stops_the_measure_and_names_the_caption(small_root, monkeypatch):
    gray = (("background", "gray"),)
    assert split_specificity(SCENES, [[gray], [], []])["max_in_split"] == 1  # scene 2 is gray too
    monkeypatch.setattr(FactIndex, "true_of", lambda self, facts, exclude=None: [])
    with pytest.raises(IndexDisagreement, match=r"^image scene 0, caption 1: FactIndex finds scenes \[\] \(0\), "
                                                r"brute force \[2\] \(1\), for the facts \(\('background', 'gray'\),\)$"):
        split_specificity(SCENES, [[None, gray], [], []])
    monkeypatch.setattr(FactIndex, "true_of", lambda self, facts, exclude=None: [1 - (exclude or 0)])
    with open(os.path.join(small_root, "flickr30k_entities", "val.txt"), encoding="utf-8") as f:
        first = f.readline().strip()
    with pytest.raises(IndexDisagreement, match=rf"^image {first}, caption 0: FactIndex finds scenes \[1\] \(1\), "
                                                r"brute force \[\] \(0\), for the facts \(\("):
        dataset_specificity(small_root, splits=["val"])
    # lists longer than 10 are cut at 10, with their lengths given
    scenes = [{"background": "gray", "objects": []} for _ in range(13)]
    monkeypatch.setattr(FactIndex, "true_of", lambda self, facts, exclude=None: list(range(1, 12)))
    with pytest.raises(IndexDisagreement) as error:
        split_specificity(scenes, [[gray]] + [[]] * 12)
    assert str(error.value) == ("image scene 0, caption 0: FactIndex finds scenes [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] (11), "
                                "brute force [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] (12), for the facts (('background', 'gray'),)")


def test_generated_captions_pick_their_image_out_and_differ(small_root):
    measures = dataset_specificity(small_root)
    for split, n in (("train", 40), ("val", 8), ("test", 15)):
        m = measures[split]
        assert m["images"] == n and m["captions"] + m["left_out"] == 5 * n
        assert m["max_in_split"] == 0 and m["mean_in_batch"] == 0 and m["share_in_batch"] == 0
    images = _truth(small_root)
    for image_id, im in images.items():
        with open(os.path.join(small_root, "flickr30k_entities", "Sentences", f"{image_id}.txt"), encoding="utf-8") as f:
            facts = [caption_facts(line) for line in f.read().splitlines()]
        assert len(set(facts)) == 5, image_id  # the five captions state five different things


def test_the_measure_reads_the_files(small_root, tmp_path):
    """A vague caption written into a Sentences file is true of other images; the table shows it."""
    import shutil

    root = str(tmp_path / "root")
    shutil.copytree(small_root, root)
    images = _truth(root)
    test_ids = [i for i, im in images.items() if im["split"] == "test"]
    red = sum(any(o["colour"] == "red" for o in images[i]["objects"]) for i in test_ids)
    target = next(i for i in test_ids if any(o["colour"] == "red" for o in images[i]["objects"])
                  and not images[i]["unrelated_captions"])
    path = os.path.join(root, "flickr30k_entities", "Sentences", f"{target}.txt")
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    lines[1] = "[/EN#1/other A red shape] is shown ."
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    m = dataset_specificity(root, batch_size=64, splits=["test"])["test"]
    assert m["max_in_split"] == red - 1 and m["share_in_split"] == pytest.approx(1 / m["captions"])
    assert m["mean_in_batch"] == pytest.approx((red - 1) / m["captions"])  # the batch holds the whole split
    table = format_specificity({"test": m})
    assert table.splitlines()[2].startswith(f"| test | 15 | {m['captions']} ({m['left_out']}) |")


def test_an_image_missing_from_the_ground_truth_is_named(small_root, tmp_path):
    import shutil

    root = str(tmp_path / "root")
    shutil.copytree(small_root, root)
    with open(os.path.join(root, "flickr30k_entities", "val.txt"), "a", encoding="utf-8") as f:
        f.write("123\n")
    with pytest.raises(KeyError, match=r"ground_truth.json has no image '123' of val.txt"):
        dataset_specificity(root, splits=["val"])


def _copy_with_first_val_image(small_root, tmp_path):
    root = str(tmp_path / "root")
    shutil.copytree(small_root, root)
    with open(os.path.join(root, "flickr30k_entities", "val.txt"), encoding="utf-8") as f:
        image_id = f.readline().strip()
    return root, image_id, os.path.join(root, "flickr30k_entities", "Sentences", f"{image_id}.txt")


def test_a_bad_caption_line_or_a_missing_sentences_file_is_named(small_root, tmp_path):
    root, _, path = _copy_with_first_val_image(small_root, tmp_path)
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    lines[1] = "[/EN#1/other a circle"
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with pytest.raises(BadAnnotationError) as error:
        dataset_specificity(root, splits=["val"])
    assert str(error.value).startswith(f"{path}:2: '[' at column 1 is never closed")
    os.remove(path)
    with pytest.raises(FileNotFoundError) as error:
        dataset_specificity(root, splits=["val"])
    assert str(error.value) == f"Sentences file {path!r} does not exist"


def test_an_image_recorded_without_unrelated_captions_has_none(small_root, tmp_path):
    root, image_id, _ = _copy_with_first_val_image(small_root, tmp_path)
    before = dataset_specificity(root, splits=["val"])["val"]
    truth = os.path.join(root, "ground_truth.json")
    with open(truth, encoding="utf-8") as f:
        data = json.load(f)
    unrelated = len(data["images"][image_id]["unrelated_captions"])
    del data["images"][image_id]["unrelated_captions"]
    with open(truth, "w", encoding="utf-8") as f:
        json.dump(data, f)
    after = dataset_specificity(root, splits=["val"])["val"]
    assert after["left_out"] == before["left_out"] - unrelated and after["batch_size"] == 64
    assert after["captions"] == before["captions"] + unrelated


def _dataset_stats():
    import sys

    sys.path.insert(0, os.path.dirname(tool_path("dataset_stats.py")))
    try:
        import dataset_stats
    finally:
        sys.path.pop(0)
    return dataset_stats


def test_dataset_stats_prints_the_table_of_a_root(small_root, capsys):
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.DATASETS.TRAIN, cfg.DATASETS.TEST = ("flickr30k_entities_train",), ()
    tool = _dataset_stats()
    tool.print_specificity(cfg, "", 64)
    assert "Caption specificity: only for the built-in dataset (no builtin_* dataset here; see --specificity-root)" \
        in capsys.readouterr().out
    tool.print_specificity(cfg, small_root, 16)
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith(f"Caption specificity of {small_root} (")
    assert out[4].startswith("| train | 40 |") and "(B = 16)" in out[4] and out[6].startswith("| test | 15 |")
    assert "every scene checked (brute force; the index agrees)" in out[1]


def test_dataset_stats_bucket_table_gives_the_shares_beside_flickr30k():
    table = _dataset_stats().bucket_table({"zero_shot": {"phrases": 1, "instances": 2},
                                           "few_shot": {"phrases": 3, "instances": 3},
                                           "common": {"phrases": 1, "instances": 5}}).splitlines()
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in table[2:]]
    # 1/5, 3/5, 1/5 of the phrases; 2/10, 3/10, 5/10 of the instances; Flickr30K's test split:
    # 1,783 / 2,764 / 472 of 5,019 phrases, 1,860 / 4,373 / 8,248 of 14,481 instances
    assert cells[0] == ["zero_shot", "1", "20.0 %", "2", "20.0 %", "35.5 %", "12.8 %"]
    assert cells[1] == ["few_shot", "3", "60.0 %", "3", "30.0 %", "55.1 %", "30.2 %"]
    assert cells[2] == ["common", "1", "20.0 %", "5", "50.0 %", "9.4 %", "57.0 %"]
    assert cells[3] == ["total", "5", "", "10", "2.0 per phrase", "5019", "2.9 per phrase"]


def _table_row(m):
    return (m["mean_in_batch"], m["share_in_batch"], m["mean_in_split"], m["share_in_split"], m["max_in_split"],
            m["captions"])


@pytest.fixture(scope="module")
def vague_root(small_root, tmp_path_factory):
    """The small dataset with every caption cut after its first phrase ("[/EN#.../other The purple
    square] ."): vague captions, each true of several images."""
    root = str(tmp_path_factory.mktemp("vague") / "root")
    shutil.copytree(small_root, root)
    sentences = os.path.join(root, "flickr30k_entities", "Sentences")
    for name in os.listdir(sentences):
        path = os.path.join(sentences, name)
        with open(path, encoding="utf-8") as f:
            lines = [line[:line.index("]") + 1] + " ." for line in f.read().splitlines()]
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return root


def test_the_measure_agrees_with_an_independent_count_on_vague_captions(vague_root):
    """The same agreement as on the default dataset (below), on captions true of many images
    (the mutation runs use this one: the default dataset's costs 16 s)."""
    measures = dataset_specificity(vague_root)
    for split in ("train", "val", "test"):
        assert _table_row(measures[split]) == pytest.approx(independent_specificity.count_split(vague_root, split),
                                                            rel=1e-12, abs=1e-12), split
        assert measures[split]["mean_in_batch"] > 0.5 and measures[split]["max_in_split"] >= 2, split


def test_the_measure_agrees_with_an_independent_count_on_the_default_dataset(builtin_root, capsys):
    """The figures dataset_stats prints, against tests/data/independent_specificity.py (its own
    parser, predicates and binomials) on the dataset every command uses."""
    measures = dataset_specificity(builtin_root)
    assert dataset_specificity(builtin_root, brute_force=False) == measures  # the index alone, as compare_retrieval uses it
    for split in ("train", "val", "test"):
        assert _table_row(measures[split]) == pytest.approx(independent_specificity.count_split(builtin_root, split),
                                                            rel=1e-12, abs=1e-12), split
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    _dataset_stats().print_specificity(cfg, builtin_root, 64)
    rows = capsys.readouterr().out.splitlines()[4:7]
    for row, split in zip(rows, ("train", "val", "test")):
        m = measures[split]
        assert row.startswith(f"| {split} | {m['images']} | {m['captions']} ({m['left_out']}) | "
                              f"{m['mean_in_batch']:.3f} (B = 64) | {100 * m['share_in_batch']:.1f} % |")


def test_the_independent_count_reads_captions_as_the_project_does():
    """Hand cases for the second reader, so that agreeing with it means something."""
    scene = SCENES[0]
    for line, true in [("[/EN#1/other A small red circle] on the left is left of [/EN#2/other the blue square] .", True),
                       ("[/EN#1/other The circle] is right of [/EN#2/other a square] .", False),
                       ("[/EN#1/other Two red circles] are on [/EN#3/scene a gray background] .", False),
                       ("[/EN#1/other The square] sits on [/EN#3/scene the gray backdrop] on the right .", True),
                       ("[/EN#1/other The square] sits on [/EN#3/scene the gray backdrop] at the top .", False),
                       ("[/EN#0/notvisual This picture] shows [/EN#4/other a soft shadow] .", True)]:
        assert all(p(scene) for p in independent_specificity.predicates(line)) is true, line
        assert caption_true_of(caption_facts(line), scene) is true, line
