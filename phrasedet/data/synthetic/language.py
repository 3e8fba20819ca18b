"""The words of the built-in dataset: which names its captions give each colour, shape, size,
position and relation, and how a caption's words are read back into attribute values.

Two languages write the same scenes:

* ``v3`` (the default, :data:`V3`): one name per attribute value ("red", "circle", "small"),
  exactly the words of generator version 3;
* ``long_tail`` (:data:`LONG_TAIL`): several real English names per value, related as WordNet
  relates them (synonyms and near-synonyms: "red", "crimson", "scarlet"; the shapes' WordNet
  synonyms: "triangle", "trigon"; hypernyms: "polygon", "quadrilateral", "figure"), drawn with a
  Zipfian frequency (the ``r``-th name of a value has weight ``1 / r ** exponent``). The last
  name of each value (:attr:`Names.held_out`) never occurs in a training caption, so zero-shot
  phrases hold words unseen in training, as on Flickr30K.

The structure of every caption (templates, which objects, articles, the steps that make it
specific) comes from the generator's random stream; a language's :class:`Namer` only chooses the
names, from a stream of its own. Hypernyms true of several shapes ("polygon": a triangle, square or
diamond) state no shape when read back (:meth:`Language.read_noun`), so a caption's facts never
say more than its words, and both languages give every caption the same facts: the two worlds
differ in their words only.
"""
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

__all__ = ["Names", "Language", "Namer", "V3", "LONG_TAIL", "LANGUAGES", "get_language", "plural"]


#: Plurals that do not add "s" or "es".
IRREGULAR_PLURALS = {"rhombus": "rhombi"}


def plural(noun: str) -> str:
    """English plural of a shape noun ("cross" -> "crosses", "one" -> "ones", "rhombus" -> "rhombi")."""
    if noun in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[noun]
    return noun + "es" if noun.endswith(("s", "x")) else noun + "s"


@dataclass(frozen=True)
class Names:
    """The names of one value, most frequent first; the last ``held_out`` of them never occur in
    a training caption."""

    names: Tuple[str, ...]
    held_out: int = 0

    def allowed(self, split: str) -> Tuple[str, ...]:
        """The names a caption of ``split`` may use."""
        return self.names[:len(self.names) - self.held_out] if split == "train" else self.names

    @property
    def unseen(self) -> Tuple[str, ...]:
        return self.names[len(self.names) - self.held_out:]


def _names(*words: str) -> Names:
    """Names from words, a final ``*word`` held out of training ("red", ..., "*vermilion")."""
    held = sum(w.startswith("*") for w in words)
    if any(w.startswith("*") for w in words[:len(words) - held]):
        raise ValueError(f"held-out names must come last: {words}")
    return Names(tuple(w.lstrip("*") for w in words), held)


def _table(values: Dict[str, Tuple[str, ...]]) -> Dict[str, Names]:
    return {k: _names(*v) for k, v in values.items()}


@dataclass(frozen=True)
class Language:
    """Every name of one language, and the tables that read a caption back.

    ``colours``, ``backgrounds``, ``shapes``, ``sizes``: value -> :class:`Names`. ``generic``:
    nouns true of every shape ("shape", "object"); ``hypernyms``: noun -> the shapes it is true of
    (one shape: read back as that shape; several: as no shape). ``positions_outside``: value ->
    word tuples said after a phrase ("on the left"); ``positions_inside`` and
    ``position_adjectives``: ReferIt's ("on the left", "left"). ``relations``: relation ->
    word tuples ("left of", "to the left of"). ``exponent`` and ``head``: how often each name is
    drawn (:meth:`name_probabilities`).

    How phrases are worded (:class:`.captions.CaptionWriter`): ``style_weights``, the weights of
    the five phrase styles (colour + shape, size + colour + shape, shape, colour + generic noun,
    size + shape; empty: version 3's); ``say_weight``, the weight of "say one more attribute of a
    phrase" among the steps that make a caption specific (1: as likely as placing an object or
    naming the background); ``added_object_style``, the style of an object a caption adds to be
    specific (None: any style that identifies it).
    """

    name: str
    colours: Dict[str, Names]
    backgrounds: Dict[str, Names]
    background_nouns: Names
    shapes: Dict[str, Names]
    sizes: Dict[str, Names]
    generic: Names
    hypernyms: Dict[str, Tuple[str, ...]]
    positions_outside: Dict[str, Names]
    positions_inside: Dict[str, Names]
    position_adjectives: Dict[str, Names]
    relations: Dict[str, Names]
    exponent: float = 1.0
    head: Optional[float] = None
    style_weights: Tuple[float, ...] = ()
    say_weight: float = 1.0
    added_object_style: Optional[str] = "zcs"
    _read: dict = field(default_factory=dict, init=False, compare=False, repr=False)  # built on first read

    # ---- reading back -----------------------------------------------------------------------
    def _lookup(self) -> dict:
        if not self._read:
            colour = {n: v for v, ns in self.colours.items() for n in ns.names}
            background = {n: v for v, ns in self.backgrounds.items() for n in ns.names}
            size = {n: v for v, ns in self.sizes.items() for n in ns.names}
            size.setdefault("big", "large")  # ReferIt's "the big red circle" in version 3
            noun = {}
            for v, ns in self.shapes.items():
                for n in ns.names:
                    noun[n], noun[plural(n)] = (v, False), (v, True)
            for n, shapes in self.hypernyms.items():
                v = shapes[0] if len(shapes) == 1 else None
                noun[n], noun[plural(n)] = (v, False), (v, True)
            for n in self.generic.names:
                noun[n], noun[plural(n)] = (None, False), (None, True)
            def phrases(table):  # longest first: "on the left side" is read before "on the left"
                pairs = [(tuple(w.split()), v) for v, ns in table.items() for w in ns.names]
                return dict(sorted(pairs, key=lambda kv: -len(kv[0])))
            self._read.update(colour=colour, background=background, size=size, noun=noun,
                              position=phrases(self.positions_outside), relation=phrases(self.relations))
        return self._read

    def read_colour(self, word: str) -> Optional[str]:
        return self._lookup()["colour"].get(word)

    def read_background(self, word: str) -> Optional[str]:
        return self._lookup()["background"].get(word)

    def read_size(self, word: str) -> Optional[str]:
        return self._lookup()["size"].get(word)

    def read_noun(self, word: str) -> Optional[tuple]:
        """``(shape or None, plural)`` of a shape noun, a hypernym or a generic noun; None otherwise."""
        return self._lookup()["noun"].get(word)

    @property
    def position_phrases(self) -> dict:
        """word tuple -> position, for the words said after a phrase (longest first)."""
        return self._lookup()["position"]

    @property
    def relation_phrases(self) -> dict:
        """word tuple -> relation ("left of", ...), longest first."""
        return self._lookup()["relation"]

    def all_names(self) -> dict:
        """kind -> every name of that kind (colour, background, shape, size, generic, hypernym)."""
        def flat(table):
            return sorted({n for ns in table.values() for n in ns.names})
        return {"colour": flat(self.colours), "background": flat(self.backgrounds), "shape": flat(self.shapes),
                "size": flat(self.sizes), "generic": sorted(self.generic.names), "hypernym": sorted(self.hypernyms)}

    def unseen_names(self) -> list:
        """Every name that never occurs in a training caption, sorted."""
        tables = [self.colours, self.backgrounds, self.shapes, self.sizes, {"": self.generic}]
        return sorted({n for t in tables for ns in t.values() for n in ns.unseen})

    def name_probabilities(self, names: Names, options: Sequence[str]) -> np.ndarray:
        """The probability of each of ``options`` (names of ``names``): ``head`` for the first
        name, when it is one of them and ``head`` is set, and the rest shared by the others with
        Zipfian weights ``1 / r ** exponent`` (``r``: a name's rank among all the value's names);
        without ``head``, every option by those weights."""
        ranks = np.array([names.names.index(n) + 1 for n in options], dtype=float)
        w = ranks ** -self.exponent
        if self.head is None or ranks[0] != 1 or len(options) == 1:
            return w / w.sum()
        return np.concatenate([[self.head], (1.0 - self.head) * w[1:] / w[1:].sum()])

    def namer(self, rng: Optional[np.random.Generator], split: str) -> "Namer":
        return Namer(self, rng, split)


class Namer:
    """Chooses the names of one split's captions from its own random stream (none for a
    language of one name per value, which never draws). Every method takes the version-3 word as
    ``hint`` where version 3 chose among several itself ("in the center" / "in the middle")."""

    def __init__(self, language: Language, rng: Optional[np.random.Generator], split: str):
        self.language, self.rng, self.split = language, rng, split

    def _draw(self, names: Names, hint: Optional[str] = None) -> str:
        options = list(names.allowed(self.split))
        if len(names.names) == 1 or self.rng is None:
            return hint if hint is not None else options[0]
        return options[int(self.rng.choice(len(options), p=self.language.name_probabilities(names, options)))]

    def colour(self, value: str) -> str:
        return self._draw(self.language.colours[value])

    def background(self, value: str) -> str:
        return self._draw(self.language.backgrounds[value])

    def background_noun(self, hint: str) -> str:
        return self._draw(self.language.background_nouns, hint)

    def size(self, value: str) -> str:
        return self._draw(self.language.sizes[value])

    def shape(self, value: str, many: bool = False) -> str:
        word = self._draw(self.language.shapes[value])
        return plural(word) if many else word

    def generic(self, shape: str, hint: str, many: bool = False) -> str:
        """A noun true of ``shape`` that does not say it (version 3: ``hint``, "shape" or "object");
        in a long-tailed language also the hypernyms true of it ("polygon" for a triangle)."""
        lang = self.language
        if self.rng is None:
            word = hint
        else:
            true_of = tuple(n for n, shapes in lang.hypernyms.items() if shape in shapes and len(shapes) > 1)
            seen = lang.generic.allowed("train")  # the hypernyms rank after the seen generic nouns, before the unseen
            word = self._draw(Names(seen + true_of + lang.generic.unseen, lang.generic.held_out), hint)
        return plural(word) if many else word

    def position(self, value: str, hint: str) -> str:
        return self._draw(self.language.positions_outside[value], hint)

    def position_inside(self, value: str) -> str:
        return self._draw(self.language.positions_inside[value])

    def position_adjective(self, value: str) -> str:
        return self._draw(self.language.position_adjectives[value])

    def relation(self, value: str) -> str:
        return self._draw(self.language.relations[value])


def _one(values: Dict[str, str]) -> Dict[str, Names]:
    return {k: Names((v,)) for k, v in values.items()}


_V3_POSITIONS = {"left": Names(("on the left",)), "right": Names(("on the right",)), "top": Names(("at the top",)),
                 "bottom": Names(("at the bottom",)), "center": Names(("in the center", "in the middle"))}
_RELATIONS = ("left of", "right of", "above", "below", "next to")

#: Version 3's words: one name per value (the scene module's own names).
V3 = Language(
    name="v3",
    colours=_one({c: c for c in ("red", "green", "blue", "yellow", "purple", "orange", "white", "black")}),
    backgrounds=_one({b: b for b in ("gray", "brown", "teal", "pink")}),
    background_nouns=Names(("background", "backdrop")),
    shapes=_one({s: s for s in ("circle", "square", "triangle", "star", "cross", "diamond")}),
    sizes=_one({"small": "small", "large": "large"}),
    generic=Names(("shape", "object")),
    hypernyms={},
    positions_outside=_V3_POSITIONS,
    positions_inside=_one({"left": "on the left", "right": "on the right", "top": "at the top",
                           "bottom": "at the bottom", "center": "in the middle"}),
    position_adjectives=_one({"left": "left", "right": "right", "top": "top", "bottom": "bottom", "center": "middle"}),
    relations=_one({r: r for r in _RELATIONS}),
)

#: The long-tailed language (issue 42). Names in Zipfian order; ``*`` marks the name held out of
#: training. Colour names are WordNet synonyms or near-synonyms (WordNet's "red" has "crimson",
#: "scarlet", "vermilion", "cherry", "ruby" among its similar-to and hyponym colours); shape
#: names are each shape's WordNet synonyms ("triangle": "trigon", "trilateral"; "diamond":
#: "rhombus", "rhomb", "lozenge"; "star": the five-pointed star's "pentagram", "pentacle",
#: "pentangle"), plus "rectangle", the square's hypernym that no other shape here has.
LONG_TAIL = Language(
    name="long_tail",
    colours=_table({
        "red": ("red", "crimson", "scarlet", "cherry", "ruby", "cardinal", "cerise", "*vermilion"),
        "green": ("green", "emerald", "lime", "jade", "mint", "kelly", "*viridian"),
        "blue": ("blue", "navy", "azure", "cobalt", "sapphire", "indigo", "ultramarine", "*cerulean"),
        "yellow": ("yellow", "golden", "gold", "lemon", "canary", "mustard", "butter", "*saffron"),
        "purple": ("purple", "violet", "lilac", "lavender", "plum", "grape", "orchid", "*mauve"),
        "orange": ("orange", "tangerine", "amber", "apricot", "peach", "carrot", "*marigold"),
        "white": ("white", "ivory", "snowy", "pearl", "cream", "milky", "chalk", "*alabaster"),
        "black": ("black", "ebony", "jet", "coal", "inky", "pitch", "sooty", "*onyx"),
    }),
    backgrounds=_table({
        "gray": ("gray", "grey", "slate", "silver", "*ash"),
        "brown": ("brown", "tan", "chocolate", "coffee", "*umber"),
        "teal": ("teal", "turquoise", "aqua", "*cyan"),
        "pink": ("pink", "rose", "salmon", "*blush"),
    }),
    background_nouns=_names("background", "backdrop", "canvas", "*field"),
    shapes=_table({
        "circle": ("circle", "disc", "disk", "*roundel"),
        "square": ("square", "rectangle", "*foursquare"),
        "triangle": ("triangle", "trigon", "*trilateral"),
        "star": ("star", "pentagram", "pentacle", "*pentangle"),
        "cross": ("cross", "crisscross", "*plus"),
        "diamond": ("diamond", "rhombus", "lozenge", "*rhomb"),
    }),
    sizes=_table({
        "small": ("small", "little", "tiny", "mini", "petite", "miniature", "*wee"),
        "large": ("large", "big", "huge", "giant", "enormous", "massive", "*colossal"),
    }),
    generic=_names("shape", "object", "one", "figure", "form", "*thing"),
    hypernyms={"polygon": ("triangle", "square", "diamond"), "quadrilateral": ("square", "diamond"),
               "parallelogram": ("square", "diamond"), "quadrangle": ("square", "diamond")},
    positions_outside=_table({
        "left": ("on the left", "on the left side", "at the left"),
        "right": ("on the right", "on the right side", "at the right"),
        "top": ("at the top", "toward the top", "along the top"),
        "bottom": ("at the bottom", "toward the bottom", "along the bottom"),
        "center": ("in the center", "in the middle", "in the centre"),
    }),
    positions_inside=_table({
        "left": ("on the left", "at left"), "right": ("on the right", "at right"),
        "top": ("at the top", "up top"), "bottom": ("at the bottom", "down low"),
        "center": ("in the middle", "in the center"),
    }),
    position_adjectives=_table({
        "left": ("left", "leftmost"), "right": ("right", "rightmost"), "top": ("top", "upper", "topmost"),
        "bottom": ("bottom", "lower", "lowermost"), "center": ("middle", "central"),
    }),
    relations=_table({
        "left of": ("left of", "to the left of"), "right of": ("right of", "to the right of"),
        "above": ("above", "over"), "below": ("below", "under", "beneath"), "next to": ("next to", "beside", "near"),
    }),
    # Measured against Flickr30K Entities' bucket shares (docs/DATA.md, "The long-tailed language"):
    # the first name of a value takes 80 % of its mentions, the others share the rest by 1 / rank;
    # phrases name the shape alone more often than version 3's, and a caption becomes specific more
    # by placing its objects and adding others than by saying more of each phrase.
    exponent=1.0,
    head=0.8,
    style_weights=(0.25, 0.01, 0.6, 0.15, 0.01),
    say_weight=0.1,
    added_object_style="s",
)

LANGUAGES = {"v3": V3, "long_tail": LONG_TAIL}


def get_language(name: str) -> Language:
    """The language called ``name`` (``v3`` or ``long_tail``); a clear error for another name."""
    if name not in LANGUAGES:
        raise KeyError(f"unknown built-in language {name!r}: expected one of {sorted(LANGUAGES)}")
    return LANGUAGES[name]
