"""The facts a built-in caption states and the specificity measure built on them, on hand-made
scenes and captions (phrasedet/data/synthetic/facts.py, specificity.py)."""
import json
import math
import os
from itertools import product

import numpy as np
import pytest

from phrasedet.data.datasets.common import BadAnnotationError
from phrasedet.data.synthetic import generate_builtin_dataset
from phrasedet.data.synthetic.facts import FactIndex, caption_facts, caption_true_of, holds, relations_between
from phrasedet.data.synthetic.specificity import (dataset_specificity, format_specificity, in_batch_chance,
                                                  split_specificity)


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
             d(colour="green", position="left")]
    facts = ([("background", "gray")] + [("object", x) for x in descs] + [("count", x, n) for x in descs for n in (0, 1, 2)]
             + [("at_least", x, 2) for x in descs]
             + [("relation", a, r, b) for a, b in product(descs, descs) for r in ("left of", "next to")])
    for k in range(300):
        chosen = [facts[int(i)] for i in rng.choice(len(facts), size=int(rng.integers(1, 4)), replace=False)]
        exclude = int(rng.integers(40)) if k % 2 else None
        expected = [i for i, s in enumerate(scenes) if i != exclude and caption_true_of(chosen, s)]
        assert index.true_of(chosen, exclude=exclude) == expected, chosen


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
    m = split_specificity(SCENES, [[None], [], []])
    assert m["captions"] == 0 and m["left_out"] == 1 and math.isnan(m["mean_in_batch"]) and m["max_in_split"] == 0


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


def _dataset_stats():
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
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
