"""The built-in dataset's two languages (phrasedet/data/synthetic/language.py): version 3's words
kept byte for byte, and the long-tailed language's names, held-out words, reading back and scenes."""
import dataclasses
import filecmp
import hashlib
import json
import os
from itertools import combinations

import numpy as np
import pytest

from phrasedet.data.synthetic import ensure_builtin_dataset, generate_builtin_dataset
from phrasedet.data.synthetic.builtin import phrase_design
from phrasedet.data.synthetic.facts import caption_facts, caption_true_of
from phrasedet.data.synthetic.ground_truth import load_language
from phrasedet.data.synthetic.language import LONG_TAIL, V3, Names, get_language, plural
from phrasedet.data.synthetic.specificity import dataset_specificity

SMALL = dict(num_train=40, num_val=5, num_test=15)
LT_SIZES = dict(num_train=80, num_val=8, num_test=40)
#: sha256 of a small version-3 dataset's Sentences, Annotations and ground_truth.json, made by the
#: generator before the languages existed (commit e212b31) and again after: the same bytes.
V3_SMALL_DIGEST = "01aa364bfa6b90ff6671f474b2d375ed161df40c6772c0f7612c1efe82204891"


def _digest(root):
    h = hashlib.sha256()
    for sub in ("flickr30k_entities/Sentences", "flickr30k_entities/Annotations"):
        for name in sorted(os.listdir(os.path.join(root, sub))):
            with open(os.path.join(root, sub, name), "rb") as f:
                h.update(f.read())
    with open(os.path.join(root, "ground_truth.json"), "rb") as f:
        h.update(f.read())
    return h.hexdigest()


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    """The same small scenes in both languages: (v3 root, long-tail root)."""
    base = tmp_path_factory.mktemp("worlds")
    v3, lt = str(base / "v3"), str(base / "lt")
    generate_builtin_dataset(v3, seed=0, **LT_SIZES)
    generate_builtin_dataset(lt, seed=0, language="long_tail", **LT_SIZES)
    return v3, lt


def _truth(root):
    with open(os.path.join(root, "ground_truth.json"), encoding="utf-8") as f:
        return json.load(f)


def test_version_3_is_written_byte_for_byte_as_before(tmp_path):
    generate_builtin_dataset(str(tmp_path / "v3"), seed=0, **SMALL)
    generate_builtin_dataset(str(tmp_path / "v3_named"), seed=0, language="v3", **SMALL)
    assert _digest(str(tmp_path / "v3")) == V3_SMALL_DIGEST
    assert _digest(str(tmp_path / "v3_named")) == V3_SMALL_DIGEST


def test_the_long_tailed_names_of_different_kinds_never_coincide():
    kinds = LONG_TAIL.all_names()
    nouns = set(kinds["shape"]) | set(kinds["generic"]) | set(kinds["hypernym"])
    nouns |= {plural(n) for n in nouns}
    for a, b in combinations([set(kinds["colour"]), set(kinds["background"]), set(kinds["size"]), nouns], 2):
        assert not a & b, a & b
    # one value per name within a kind
    for table in (LONG_TAIL.colours, LONG_TAIL.backgrounds, LONG_TAIL.shapes, LONG_TAIL.sizes):
        names = [n for ns in table.values() for n in ns.names]
        assert len(names) == len(set(names))


def test_no_position_phrase_starts_a_relation_phrase_or_the_reverse():
    # caption_facts tries positions first: "to the left" would swallow "to the left of"
    positions = [" ".join(k) for k in LONG_TAIL.position_phrases]
    relations = [" ".join(k) for k in LONG_TAIL.relation_phrases]
    for p in positions:
        for r in relations:
            assert not (r + " ").startswith(p + " ") and not (p + " ").startswith(r + " "), (p, r)


def test_every_name_reads_back_as_its_value():
    lang = LONG_TAIL
    for value, names in lang.colours.items():
        assert all(lang.read_colour(n) == value for n in names.names)
    for value, names in lang.backgrounds.items():
        assert all(lang.read_background(n) == value for n in names.names)
    for value, names in lang.sizes.items():
        assert all(lang.read_size(n) == value for n in names.names)
    for value, names in lang.shapes.items():
        for n in names.names:
            assert lang.read_noun(n) == (value, False) and lang.read_noun(plural(n)) == (value, True)
    # a hypernym of several shapes says no shape; "rhombus" has an irregular plural
    assert lang.read_noun("polygon") == (None, False) and lang.read_noun("quadrilaterals") == (None, True)
    assert lang.read_noun("rhombi") == ("diamond", True) and lang.read_noun("one") == (None, False)
    assert lang.read_colour("red") == "red" and V3.read_colour("crimson") is None
    assert lang.relation_phrases[("to", "the", "left", "of")] == "left of"


def test_plural_by_hand():
    assert [plural(n) for n in ("circle", "cross", "box", "rhombus", "one")] == [
        "circles", "crosses", "boxes", "rhombi", "ones"]


def test_a_language_made_from_another_builds_its_own_reading_tables():
    """``dataclasses.replace`` gives a language that reads its own words (the tables are built on
    first read, and were once shared with the original, already built)."""
    LONG_TAIL.read_noun("polygon")
    ball = dataclasses.replace(LONG_TAIL, hypernyms={**LONG_TAIL.hypernyms, "ball": ("circle",)})  # one shape: names it
    assert ball.read_noun("ball") == ("circle", False) and ball.read_noun("balls") == ("circle", True)
    assert LONG_TAIL.read_noun("ball") is None
    assert ball.read_noun("polygons") == (None, True) and ball.read_noun("ones") == (None, True)
    lengths = [len(words) for words in ball.position_phrases]  # longest first
    assert lengths == sorted(lengths, reverse=True) and lengths[0] > lengths[-1]
    v3 = dataclasses.replace(V3)
    assert v3.read_size("big") == "large" and v3.read_size("large") == "large" and v3.read_size("small") == "small"


def test_a_namer_draws_every_allowed_name_by_the_languages_probabilities():
    namer = LONG_TAIL.namer(np.random.default_rng(0), "test")
    names = LONG_TAIL.colours["red"]
    drawn = [namer.colour("red") for _ in range(4000)]
    share = np.array([drawn.count(n) for n in names.names]) / len(drawn)
    assert share == pytest.approx(LONG_TAIL.name_probabilities(names, names.names), abs=0.03)
    assert {namer.position_inside("left") for _ in range(100)} == set(LONG_TAIL.positions_inside["left"].names)


def test_name_probabilities_by_hand():
    lang = LONG_TAIL  # head 0.8, exponent 1
    names = Names(("a", "b", "c", "d"), held_out=1)
    # every split but train: a 0.8; b, c, d share 0.2 by 1/2 : 1/3 : 1/4
    p = lang.name_probabilities(names, names.allowed("test"))
    tail = np.array([1 / 2, 1 / 3, 1 / 4])
    assert p == pytest.approx(np.concatenate([[0.8], 0.2 * tail / tail.sum()]))
    assert names.allowed("train") == ("a", "b", "c") and names.unseen == ("d",)
    assert lang.name_probabilities(names, ("b", "c")) == pytest.approx([0.6, 0.4])  # no head among them
    assert lang.name_probabilities(names, ("a",)).tolist() == [1.0]  # one option: all of it, head or not
    assert lang.name_probabilities(names, ("a", "b")) == pytest.approx([0.8, 0.2])
    square = dataclasses.replace(lang, head=None, exponent=2)  # an integer exponent: 1 / r ** 2 over integer ranks
    assert square.name_probabilities(names, ("a", "b")) == pytest.approx([0.8, 0.2])
    assert V3.namer(None, "train").colour("red") == "red"


def test_phrase_design_reads_the_language():
    assert phrase_design("crimson trigon", LONG_TAIL) == "rare"        # red triangle
    assert phrase_design("small vermilion disc", LONG_TAIL) == "common"  # red circle
    assert phrase_design("mauve pentagrams", LONG_TAIL) == "held_out"  # purple star
    assert phrase_design("crimson polygon", LONG_TAIL) == "generic"
    assert phrase_design("crimson trigon") == "generic"                # version 3 knows neither word


def test_the_tables_are_built_from_their_words_held_out_names_last():
    """The builders the two languages' tables are written with (run when the module is imported)."""
    from phrasedet.data.synthetic.language import _names, _one

    assert _names("red", "crimson", "*vermilion") == Names(("red", "crimson", "vermilion"), 1)
    assert _names("X", "*Xray") == Names(("X", "Xray"), 1)  # only the held-out mark is stripped
    assert _names("red", "crimson").allowed("train") == ("red", "crimson") and _names("red").held_out == 0
    assert _names("a", "*b", "*c").unseen == ("b", "c") and _names("a", "*b", "*c").allowed("train") == ("a",)
    with pytest.raises(ValueError) as error:
        _names("a", "*b", "c")
    assert str(error.value) == "held-out names must come last: ('a', '*b', 'c')"
    assert _one({"left": "on the left", "top": "at the top"}) == {"left": Names(("on the left",)), "top": Names(("at the top",))}
    assert LONG_TAIL.unseen_names() == sorted({n for t in (LONG_TAIL.colours, LONG_TAIL.backgrounds, LONG_TAIL.shapes,
                                                           LONG_TAIL.sizes) for ns in t.values() for n in ns.unseen}
                                              | set(LONG_TAIL.generic.unseen))
    assert "thing" in LONG_TAIL.unseen_names() and V3.unseen_names() == []


def test_unknown_language_is_named(tmp_path):
    with pytest.raises(KeyError, match="unknown built-in language 'klingon': expected one of"):
        get_language("klingon")
    with pytest.raises(KeyError, match="klingon"):
        ensure_builtin_dataset(str(tmp_path), language="klingon")
    assert not os.listdir(tmp_path)


def test_both_languages_draw_the_same_scenes_and_images(worlds):
    v3, lt = worlds
    a, b = _truth(v3), _truth(lt)
    assert list(a["images"]) == list(b["images"])
    for image_id, im in a["images"].items():
        other = b["images"][image_id]
        assert (im["background"], im["objects"], im["split"]) == (other["background"], other["objects"], other["split"])
        assert filecmp.cmp(os.path.join(v3, im["file_name"]), os.path.join(lt, other["file_name"]), shallow=False)
    assert b["parameters"]["language"] == "long_tail" and "language" not in a["parameters"]
    assert load_language(lt) is LONG_TAIL and load_language(v3) is V3


def _caption_words(truth, split):
    words = set()
    for im in truth["images"].values():
        if im["split"] == split:
            for caption in im["captions"]:
                words |= {w.lower().strip(".,") for w in caption.split()}
            for ref in im["refclef"]["refs"]:
                for s in ref["sentences"]:
                    words |= set(s["tokens"])
    return words


def test_held_out_names_never_occur_in_training_and_do_in_test(worlds):
    truth = _truth(worlds[1])
    unseen = set(LONG_TAIL.unseen_names())
    unseen |= {plural(n) for n in unseen}
    train, test = _caption_words(truth, "train"), _caption_words(truth, "test")
    assert not train & unseen
    assert test & unseen
    # and the tail is used: more than one name per colour in training
    assert len(train & set(LONG_TAIL.all_names()["colour"])) > 8


def test_every_long_tailed_caption_is_true_of_its_own_image(worlds):
    root = worlds[1]
    truth = _truth(root)
    checked = 0
    for image_id, im in truth["images"].items():
        scene = {"background": im["background"], "objects": im["objects"]}
        with open(os.path.join(root, "flickr30k_entities", "Sentences", f"{image_id}.txt"), encoding="utf-8") as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        for c, line in enumerate(lines):
            if c in im["unrelated_captions"]:
                continue
            facts = caption_facts(line, language=LONG_TAIL)
            assert caption_true_of(facts, scene), (image_id, line, facts)
            checked += bool(facts)
    assert checked > 0.9 * 5 * len(truth["images"])  # nearly every caption states something


def test_every_object_phrase_names_its_object(worlds):
    truth, lang, n = _truth(worlds[1]), LONG_TAIL, 0
    for im in truth["images"].values():
        for p in im["phrases"]:
            if p["reason"] is not None or len(p["objects"]) != 1:
                continue
            obj = im["objects"][p["objects"][0]]
            for w in p["phrase_raw"].lower().split():
                if lang.read_colour(w) is not None:
                    assert lang.read_colour(w) == obj["colour"], (p, obj)
                if lang.read_size(w) is not None:
                    assert lang.read_size(w) == obj["size"], (p, obj)
                if lang.read_noun(w) is not None and lang.read_noun(w)[0] is not None:
                    assert lang.read_noun(w)[0] == obj["shape"], (p, obj)
                for hypernym, shapes in lang.hypernyms.items():
                    if w in (hypernym, plural(hypernym)):
                        assert obj["shape"] in shapes, (p, obj)
            n += 1
    assert n > 500


def test_long_tailed_captions_stay_specific_when_read_in_their_language(worlds):
    m = dataset_specificity(worlds[1], batch_size=64)
    assert all(split["mean_in_batch"] < 0.05 for split in m.values()), m
    # read as version 3 they state far less: the measure must read each dataset's own language
    from phrasedet.data.synthetic import specificity

    images = specificity.load_ground_truth(worlds[1])
    _, facts_v3, _ = specificity._read_split(worlds[1], images, "train", V3)
    _, facts_lt, _ = specificity._read_split(worlds[1], images, "train", LONG_TAIL)
    said = lambda captions: sum(len(f) for fs in captions for f in fs if f is not None)  # noqa: E731
    assert said(facts_v3) < said(facts_lt)


def test_the_long_tailed_dataset_has_its_own_cache_folder(tmp_path):
    root = ensure_builtin_dataset(str(tmp_path), language="long_tail", **SMALL)
    assert os.path.basename(root).startswith("builtin-v3-long-tail-seed0")
    assert load_language(root) is LONG_TAIL


def test_the_long_tailed_splits_are_registered_with_their_language():
    from detectron2.data import DatasetCatalog, MetadataCatalog

    import phrasedet  # noqa: F401  (registers the datasets)
    from phrasedet.data.datasets.builtin import builtin_language_of

    for name in ("builtin_longtail_flickr30k_entities_train", "builtin_longtail_referit_test",
                 "builtin_longtail_flickr30k_captions_val", "builtin_longtail_flickr30k_pointing_test"):
        assert name in DatasetCatalog.list() and builtin_language_of(name) == "long_tail"
    assert builtin_language_of("builtin_flickr30k_entities_train") == "v3"
    assert builtin_language_of("flickr30k_entities_train") is None
    assert MetadataCatalog.get("builtin_longtail_flickr30k_entities_val").train_dataset == \
        "builtin_longtail_flickr30k_entities_train"
