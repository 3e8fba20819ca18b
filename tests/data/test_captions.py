"""The caption writer's pieces by hand (phrasedet/data/synthetic/captions.py): chains, the
Flickr30K Entities markup read back by the project's own parser, object, group and shadow phrases,
the templates' fallbacks, the steps that make a draft specific, and the referring expressions."""
import copy
import dataclasses
from itertools import count

import numpy as np

from phrasedet.data.datasets.flickr30k_entities import parse_sentence_line
from phrasedet.data.synthetic.captions import (CaptionWriter, Chain, ChainBook, Draft, ObjectPhrase, PhraseOcc, referring_expressions,
                                               render_caption)
from phrasedet.data.synthetic.facts import FactIndex, caption_facts
from phrasedet.data.synthetic.language import LONG_TAIL, V3, plural
from phrasedet.data.synthetic.scene import Scene, SceneObject, place_shapes, plan_scene


def _planned_scene():
    """A planned and placed training scene (a large red circle on the left, a large yellow circle
    on the right) and the generator that drew it, to write its captions with."""
    rng = np.random.default_rng(3)
    scene = plan_scene(rng, "train")
    place_shapes(scene)
    return scene, rng


def _coinciding_scene():
    """A red circle and a blue square whose centres are 4 px apart: no relation, but next to each other."""
    return Scene(128, 96, "gray", [SceneObject("red", "circle", 20, box=(10, 10, 29, 29)),
                                   SceneObject("blue", "square", 20, box=(14, 14, 33, 33))])


def _writer(scene, rng, **kwargs):
    return CaptionWriter(scene, rng, ChainBook(count(1).__next__), **kwargs)


def test_a_chain_is_made_once_and_a_not_visual_one_is_id_0_and_never_listed():
    book = ChainBook(count(5).__next__)
    man = book.get("man", ("people",), "object")
    assert book.get("man", ("people",), "object") is man and man.id == 5
    sky = book.get("sky", ("other",), "notvisual")
    street = book.get("street", ("scene",), "scene")
    assert (sky.id, street.id) == (0, 6) and book.chains == [man, street]


def test_the_markup_reads_back_with_every_type_and_the_first_word_capitalized():
    subway = Chain(7, ("vehicles", "scene"), "object")
    markup, stripped, phrases = render_caption([PhraseOcc(subway, ["the", "subway"]), "arrives", "."])
    assert markup == "[/EN#7/vehicles/scene The subway] arrives ." and stripped == "The subway arrives ."
    assert [(i, p.words) for i, p in phrases] == [(0, ["The", "subway"])]
    caption, parsed = parse_sentence_line(markup)
    assert caption == stripped and [(p.phrase, p.chain_id, p.types, p.first_word_index) for p in parsed] == [
        ("The subway", "7", ["vehicles", "scene"], 0)]
    assert render_caption(["a man", "waits"])[0] == "A man waits"


def test_an_object_phrase_without_a_shape_says_shape_in_version_3s_words():
    phrase = ObjectPhrase(Chain(3, ("other",), "object"), 0, SceneObject("red", "circle", 14), "a", False, True, False)
    assert phrase.words == ["a", "red", "shape"]
    assert ObjectPhrase(Chain(3, ("other",), "object"), 0, SceneObject("red", "circle", 30, box=(0, 0, 29, 29)), "the", True, False, True).words == [
        "the", "large", "circle"]


def test_a_long_tailed_phrase_without_its_shape_may_name_a_hypernym_true_of_it():
    namer = LONG_TAIL.namer(np.random.default_rng(0), "train")
    nouns = {ObjectPhrase(Chain(1, ("other",), "object"), 0, SceneObject("red", "triangle", 14), "a", False, False, False,
                          namer=namer).words[-1] for _ in range(300)}
    assert "polygon" in nouns and not nouns & {"quadrilateral", "parallelogram", "quadrangle"}  # true of squares, not triangles
    assert nouns <= set(LONG_TAIL.generic.allowed("train")) | {"polygon"}  # nothing held out of training


def test_a_caption_writer_without_a_namer_writes_version_3s_captions():
    def captions(**namer):
        return [render_caption(s)[0] for s in _writer(*_planned_scene(), **namer).captions(True, None)]
    written = captions()
    assert written == captions(namer=V3.namer(None, "train")) and len(written) == 5


def test_a_long_tailed_writer_names_its_objects_in_the_long_tailed_words():
    scene, rng = _planned_scene()
    writer = _writer(scene, rng, namer=LONG_TAIL.namer(np.random.default_rng(0), "train"))
    colour = scene.objects[0].colour
    said = {writer.obj_phrase(0, style="cs").words[1] for _ in range(200)}
    assert said <= set(LONG_TAIL.colours[colour].allowed("train")) and said - set(V3.colours[colour].names)


def test_a_long_tailed_draft_is_judged_vague_in_its_own_language():
    """A red circle named in a long-tailed word of red (e.g. "crimson") is specific when the draft is
    read in the long-tailed language, and would be vague read in version 3's, which does not know
    the word (any circle)."""
    scene, rng = _planned_scene()
    other = copy.deepcopy(scene.record())
    other["objects"] = [{**other["objects"][1], "colour": "blue"}]  # one blue circle, the same background
    writer = _writer(scene, rng, index=FactIndex([scene.record(), other]), position=0,
                     namer=LONG_TAIL.namer(np.random.default_rng(0), "train"))
    phrase = next(p for p in (writer.obj_phrase(0, style="cs") for _ in range(200)) if p.words[1] not in V3.colours["red"].names)
    writer.draft = Draft([phrase])
    assert not writer._vague()
    writer.draft = Draft([writer.obj_phrase(0, style="s")])  # "a circle": true of the other scene too
    assert writer._vague()


def test_caption_0_keeps_its_colour_shape_phrases_as_they_are_however_vague():
    """Caption 0 of a scene whose twin is in the split stays vague whatever it says, so the writer
    takes all its steps; phrases of ``cs_combos`` never say their size, the others may."""
    scene, rng = _planned_scene()
    twin = FactIndex([scene.record(), copy.deepcopy(scene.record())])

    def sizes_said(cs_combos):
        writer = _writer(scene, rng, cs_combos=cs_combos, index=twin, position=0)
        phrases = [s for _ in range(20) for s in writer.write(writer.caption_all) if isinstance(s, ObjectPhrase)]
        return {p.words[1] in V3.sizes["large"].names for p in phrases}
    assert sizes_said([o.combo for o in scene.objects]) == {False}
    assert True in sizes_said([])


def test_a_colour_group_is_called_shapes_or_objects_in_the_writers_own_generic_words():
    scene = Scene(128, 96, "gray", [SceneObject("red", "circle", 20, box=(10, 10, 29, 29)),
                                     SceneObject("red", "square", 20, box=(80, 10, 99, 29))])
    v3 = _writer(scene, np.random.default_rng(0))
    assert v3.group_kind == "colour"
    assert {v3.group_phrase().words[-1] for _ in range(100)} == {"shapes", "objects"}

    class Marking:  # version 3's namer, its generic nouns marked: no group noun is written without it
        def __getattr__(self, name):
            return getattr(v3.namer, name)

        def generic(self, shape, hint, many=False):
            return "generic:" + v3.namer.generic(shape, hint, many)
    marked = _writer(scene, np.random.default_rng(0), namer=Marking())
    assert {marked.group_phrase().words[-1] for _ in range(100)} == {"generic:shapes", "generic:objects"}
    long_tail = _writer(scene, np.random.default_rng(0), namer=LONG_TAIL.namer(np.random.default_rng(0), "train"))
    nouns = {long_tail.group_phrase().words[-1] for _ in range(300)}
    assert nouns - {"shapes", "objects"} and nouns <= {plural(w) for w in LONG_TAIL.generic.allowed("train")}


def test_a_shadow_is_faint_soft_or_long():
    writer = _writer(*_planned_scene())
    said = {tuple(writer.nobox_phrase().words) for _ in range(200)}
    assert said == {(a, adjective, "shadow") for a in ("a", "the") for adjective in ("faint", "soft", "long")}


def test_objects_whose_centres_nearly_coincide_have_no_relation_and_a_position_needs_no_draft():
    scene = _coinciding_scene()
    writer = _writer(scene, np.random.default_rng(0))
    assert writer.relation(0, 1) is None and writer.next_to(0, 1)
    assert writer.draft is None and writer.pos(0, writer.obj_phrase(0)) == "on the left"


def test_a_square_may_be_any_of_its_hypernyms_but_never_one_true_of_it_alone():
    def nouns(language, shape):
        namer = language.namer(np.random.default_rng(0), "train")
        return {namer.generic(shape, "shape") for _ in range(400)}
    assert {"polygon", "quadrilateral", "parallelogram", "quadrangle"} <= nouns(LONG_TAIL, "square")
    ball = dataclasses.replace(LONG_TAIL, hypernyms={**LONG_TAIL.hypernyms, "ball": ("circle",)})  # names the circle
    assert "ball" not in nouns(ball, "circle") and nouns(ball, "circle") == nouns(LONG_TAIL, "circle")


def test_a_random_caption_places_every_object_it_positions_with_or_without_a_relation():
    """Objects whose centres nearly coincide have no relation, so the templates that need one fall
    back to "<object> is <position>"; every position said marks its phrase placed in the draft."""
    scene = _coinciding_scene()
    writer = _writer(scene, np.random.default_rng(0))
    positions = {n for names in V3.positions_outside.values() for n in names.names}
    said = set()
    for _ in range(200):
        writer.draft = Draft([])
        segments = writer.caption_random()
        words = [s for s in segments if isinstance(s, str)]
        said.add(tuple(w if w not in positions else "<position>" for w in words))
        placed = [id(s) for s in segments if isinstance(s, ObjectPhrase) and id(s) in writer.draft.placed]
        assert sum(w in positions for w in words) == len(placed) == len(writer.draft.placed)
    assert said == {("is", "<position>"), ("there is", "<position>"), ("in", ",", "is", "<position>"),
                    ("sits on", "<position>"), ("is", "next to")}


def test_what_a_long_tailed_caption_stated_is_read_in_its_own_language():
    scene, rng = _planned_scene()
    writer = _writer(scene, rng, index=FactIndex([scene.record()]), position=0,
                     namer=LONG_TAIL.namer(np.random.default_rng(0), "train"))
    markups = [render_caption(writer.write(writer.caption_all))[0] for _ in range(10)]
    assert writer.stated == {caption_facts(m, language=LONG_TAIL) for m in markups}
    assert any(caption_facts(m, language=LONG_TAIL) != caption_facts(m) for m in markups)


def test_referring_expressions_without_a_namer_are_in_version_3s_words():
    scene, _ = _planned_scene()
    def expressions(**namer):
        rng = np.random.default_rng(0)
        return [referring_expressions(scene, i, rng, **namer) for _ in range(20) for i in range(len(scene.objects))]
    assert expressions() == expressions(namer=V3.namer(None, "train"))


def test_long_tailed_referring_expressions_say_sizes_in_the_long_tailed_words():
    scene, _ = _planned_scene()
    namer, rng = LONG_TAIL.namer(np.random.default_rng(0), "train"), np.random.default_rng(0)
    words = {w for _ in range(100) for e in referring_expressions(scene, 0, rng, namer) for w in e.split()}
    sizes = set(LONG_TAIL.sizes[scene.objects[0].size].allowed("train"))
    assert words & sizes - {"big", "small"} and "None" not in words
