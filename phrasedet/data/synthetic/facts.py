"""What a built-in caption states about a scene, as facts that can be checked on any scene.

A caption's facts are derived from its Flickr30K Entities markup alone (:func:`caption_facts`),
by the closed grammar the generator writes; whether they hold is decided from a scene's objects
(:func:`holds`), never from a model. A fact is a tuple:

* ``("background", colour)``: the background has that colour ("on [a gray background]");
* ``("object", desc)``: at least one object matches ``desc`` ("[a small red circle] on the left");
* ``("count", desc, n)``: exactly ``n`` objects match ``desc`` ("[two red circles]": a numbered
  group names all of its kind, as the generator writes it);
* ``("at_least", desc, n)``: at least ``n`` do ("[the red shapes]");
* ``("relation", desc_a, relation, desc_b)``: two different objects, one matching each desc, with
  ``relation(a, b)`` true ("[a red circle] is left of [a blue square]"; :func:`relations_between`).

``desc`` is a sorted tuple of ``(attribute, value)`` pairs over ``colour``, ``shape``, ``size``
and ``position``: the words of a phrase ("small red circle") plus a position said right after it
("... on the left"). A phrase naming none of them ("a soft shadow") states nothing.

A scene here is the generator's record of an image (``ground_truth.json``): ``background`` and
``objects``, each with ``colour``, ``shape``, ``size``, ``position`` and ``box`` ([x0, y0, x1, y1],
continuous pixels). :class:`FactIndex` finds the images of a split of which a caption is true.
"""
from collections import defaultdict
from itertools import combinations
from typing import Iterable, Optional, Sequence

from phrasedet.data.datasets.flickr30k_entities import parse_sentence_line

from .language import V3, Language

__all__ = ["ATTRIBUTES", "RELATIONS", "POSITION_WORDS", "NEXT_TO_GAP", "MIN_RELATION_OFFSET",
           "canonical_desc", "object_descs", "caption_facts", "relations_between", "holds", "caption_true_of",
           "FactIndex"]

ATTRIBUTES = ("colour", "shape", "size", "position")
RELATIONS = ("left of", "right of", "above", "below", "next to")
#: Words after a phrase that place its object (Scene.position's five words), in version 3's language.
POSITION_WORDS = V3.position_phrases
_NUMBERS = {"two": 2, "three": 3, "four": 4}
#: "next to": the gap between two boxes is at most this many pixels along both axes.
NEXT_TO_GAP = 12.0
#: "left of" / "above" ...: the centres differ by at least this many pixels along the dominant axis.
MIN_RELATION_OFFSET = 10.0


def _centre(box: Sequence[float]) -> tuple:
    return ((box[0] + box[2]) / 2.0, (box[1] + box[3]) / 2.0)


def relations_between(box_a: Sequence[float], box_b: Sequence[float]) -> set:
    """The relations ``a <relation> b`` that hold between two continuous boxes [x0, y0, x1, y1].

    Along the axis where the centres differ most (x on a tie), by at least
    :data:`MIN_RELATION_OFFSET` pixels: ``left of`` / ``right of`` or ``above`` / ``below``; and
    ``next to`` when the boxes are at most :data:`NEXT_TO_GAP` pixels apart along both axes.
    """
    (xa, ya), (xb, yb) = _centre(box_a), _centre(box_b)
    dx, dy = xb - xa, yb - ya
    out = set()
    if max(abs(dx), abs(dy)) >= MIN_RELATION_OFFSET:
        if abs(dx) >= abs(dy):
            out.add("left of" if dx > 0 else "right of")
        else:
            out.add("above" if dy > 0 else "below")
    gap_x = max(box_a[0], box_b[0]) - min(box_a[2], box_b[2])
    gap_y = max(box_a[1], box_b[1]) - min(box_a[3], box_b[3])
    if max(gap_x, gap_y) <= NEXT_TO_GAP:
        out.add("next to")
    return out


def canonical_desc(pairs: Iterable[tuple]) -> tuple:
    """The one form of a desc that every key and every lookup uses: its ``(attribute, value)``
    pairs sorted (by attribute name: colour, position, shape, size), without repeats.

    Two descs name the same objects exactly when their canonical forms are equal; code that
    builds index keys and code that reads them must both go through this function.
    """
    return tuple(sorted(set(pairs)))


def _desc(**attributes) -> tuple:
    return canonical_desc((k, v) for k, v in attributes.items() if v is not None)


def _matches(desc: tuple, obj: dict) -> bool:
    return all(obj[k] == v for k, v in desc)


class _Mention:
    """An object phrase of a caption: its attributes, plural or not, and its number."""

    def __init__(self, attributes: dict, plural: bool, number: Optional[int]):
        self.attributes, self.plural, self.number = attributes, plural, number

    @property
    def desc(self) -> tuple:
        return _desc(**self.attributes)

    def fact(self) -> tuple:
        if not self.plural:
            return ("object", self.desc)
        if self.number is not None:
            return ("count", self.desc, self.number)
        return ("at_least", self.desc, 2)


def _object_mention(words: list, language: Language = V3) -> Optional[_Mention]:
    """The attributes a phrase's words name, or None when it names no colour, shape or generic noun.
    A noun true of several shapes ("polygon", "shape") names no shape."""
    attributes, plural, number, noun = {}, False, None, False
    for w in words:
        colour, size, shape = language.read_colour(w), language.read_size(w), language.read_noun(w)
        if colour is not None:
            attributes["colour"] = colour
        elif size is not None:
            attributes["size"] = size
        elif shape is not None:
            if shape[0] is not None:
                attributes["shape"] = shape[0]
            plural, noun = plural or shape[1], True
        elif w in _NUMBERS:
            number = _NUMBERS[w]
    if not noun and "colour" not in attributes:
        return None
    return _Mention(attributes, plural, number)


def _match_words(words: list, k: int, table: dict):
    """The first entry of ``table`` whose word tuple starts at ``words[k]``, and its length (a
    language's tables list their longest phrases first)."""
    for key, value in table.items():
        if tuple(words[k:k + len(key)]) == key:
            return value, len(key)
    return None, 1


def caption_facts(markup: str, where: str = "<caption>", language: Language = V3) -> tuple:
    """The facts (module docstring) one caption states, from its Flickr30K Entities markup line,
    its words read in ``language`` (:mod:`.language`; "crimson" is red in the long-tailed one).

    Object phrases are those typed ``other``; ``scene`` phrases give the background; other types
    (``notvisual``, the people and vehicles of unrelated captions) state nothing. A position said
    after a singular object phrase places it; a relation word between two singular object phrases
    relates them. Facts are returned sorted and without repeats.
    """
    caption, phrases = parse_sentence_line(markup, where)
    words = [w.lower().strip(",.") for w in caption.split()]
    starts = {p.first_word_index: p for p in phrases}
    facts, mentions, relations = set(), [], []
    last, pending, k = None, None, 0
    while k < len(words):
        phrase = starts.get(k)
        if phrase is not None:
            pw = words[k:k + len(phrase.phrase.split())]
            k += len(pw)
            if "scene" in phrase.types:
                backgrounds = (language.read_background(w) for w in pw)
                facts.update(("background", b) for b in backgrounds if b is not None)
            elif "other" in phrase.types:
                mention = _object_mention(pw, language)
                if mention is not None:
                    mentions.append(mention)
                    if pending is not None and last is not None and not (last.plural or mention.plural):
                        relations.append((last, pending, mention))
                    last, pending = mention, None
            continue
        position, n = _match_words(words, k, language.position_phrases)
        if position is not None:
            if last is not None and not last.plural and "position" not in last.attributes:
                last.attributes["position"] = position
            k += n
            continue
        relation, n = _match_words(words, k, language.relation_phrases)
        if relation is not None:
            pending = relation
        k += n
    facts.update(m.fact() for m in mentions)
    facts.update(("relation", a.desc, rel, b.desc) for a, rel, b in relations)
    return tuple(sorted(facts))


def holds(fact: tuple, scene: dict) -> bool:
    """Whether ``fact`` is true of ``scene`` (module docstring)."""
    kind, objects = fact[0], scene["objects"]
    if kind == "background":
        return scene["background"] == fact[1]
    if kind == "object":
        return any(_matches(fact[1], o) for o in objects)
    if kind in ("count", "at_least"):
        n = sum(_matches(fact[1], o) for o in objects)
        return n == fact[2] if kind == "count" else n >= fact[2]
    if kind == "relation":
        _, da, rel, db = fact
        return any(_matches(da, a) and _matches(db, b) and rel in relations_between(a["box"], b["box"])
                   for a in objects for b in objects if a is not b)
    raise ValueError(f"unknown fact kind {kind!r} in {fact!r}")


def caption_true_of(facts: Iterable[tuple], scene: dict) -> bool:
    """Whether every fact holds in ``scene`` (a caption stating nothing is true of every scene)."""
    return all(holds(f, scene) for f in facts)


def object_descs(obj: dict) -> list:
    """Every desc an object matches, in canonical form (:func:`canonical_desc`): the 16 subsets
    of its four attributes."""
    items = [(k, obj[k]) for k in ATTRIBUTES]
    return [canonical_desc(c) for r in range(len(items) + 1) for c in combinations(items, r)]


class FactIndex:
    """The scenes of one split, indexed to find quickly the scenes of which a caption is true.

    Every scene is listed under the ``background`` and ``object`` facts it makes true (a bit per
    scene in an integer); :meth:`true_of` intersects those of a caption's facts and checks the
    survivors with :func:`holds`, so its answer is always that of :func:`caption_true_of`.
    """

    def __init__(self, scenes: Sequence[dict]):
        self.scenes = list(scenes)
        self._bits = defaultdict(int)
        for i, scene in enumerate(self.scenes):
            keys = {("background", scene["background"])}
            keys.update(("object", d) for o in scene["objects"] for d in object_descs(o))
            for key in keys:
                self._bits[key] |= 1 << i
        self._all = (1 << len(self.scenes)) - 1

    def candidates(self, facts: Iterable[tuple]) -> int:
        """The scenes (bit i: scene i) that have the background and an object matching every
        object desc that ``facts`` name (a relation's two, a count's above 0): a superset of
        those of which the caption is true, each then checked by :meth:`true_of`."""
        bits = self._all
        for f in facts:
            if f[0] == "background":
                keys = [f]
            elif f[0] == "relation":
                keys = [("object", canonical_desc(f[1])), ("object", canonical_desc(f[3]))]
            else:  # object, count, at_least: a count of 0 holds without any object
                keys = [("object", canonical_desc(f[1]))] if f[0] == "object" or f[2] > 0 else []
            for key in keys:
                bits &= self._bits.get(key, 0)
        return bits

    def true_of(self, facts: Sequence[tuple], exclude: Optional[int] = None) -> list:
        """Indices of the scenes of which every fact holds, ``exclude`` left out."""
        bits = self.candidates(facts)
        if exclude is not None:
            bits &= ~(1 << exclude)
        out = []
        while bits:
            low = bits & -bits
            i = low.bit_length() - 1
            if caption_true_of(facts, self.scenes[i]):
                out.append(i)
            bits ^= low
        return out
