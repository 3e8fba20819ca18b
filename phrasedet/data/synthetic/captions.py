"""Caption and referring-expression generation for the built-in dataset.

Flickr30K-Entities-style captions are built as lists of *segments*: plain words, or phrase
occurrences of a coreference :class:`Chain`. :func:`render_caption` turns them into the
bracket markup, the stripped caption and the phrase positions, so the ground truth never has
to be parsed back from text. Position words ("on the left") stay outside the brackets;
ReferIt-style expressions (:func:`referring_expressions`) put them inside.
"""
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from .facts import FactIndex, caption_facts, relations_between
from .language import V3, Namer, plural
from .scene import Scene

__all__ = ["Chain", "PhraseOcc", "ObjectPhrase", "ChainBook", "Draft", "CaptionWriter", "render_caption",
           "referring_expressions", "UNRELATED_TEMPLATES", "plural"]

NUMBERS = {2: "two", 3: "three", 4: "four"}
#: Own-chain phrase styles and their weights: colour+shape, size+colour+shape, shape,
#: colour + "shape"/"object", size+shape.
STYLES = ("cs", "zcs", "s", "cshape", "zs")
STYLE_WEIGHTS = np.array([0.45, 0.12, 0.25, 0.12, 0.06])
NOTVISUAL = ("this picture", "this image", "the picture", "the image")
#: Captions deliberately unrelated to the image (listed in UNRELATED_CAPTIONS): segments with
#: (types, words) tuples for phrases.
UNRELATED_TEMPLATES = (
    ((("people",), "A man"), "rides", (("vehicles",), "a bicycle"), "down",
     (("scene",), "the street"), "."),
    ((("people",), "Two children"), "play with", (("animals",), "a brown dog"), "."),
    ((("people",), "A woman"), "in", (("clothing",), "a long dress"), "plays",
     (("instruments",), "the violin"), "."),
    ((("people",), "A crowd"), "waits for", (("vehicles", "scene"), "the subway"), "."),
    ((("people",), "A young boy"), "raises", (("bodyparts",), "his hand"), "."),
)


@dataclass
class Chain:
    """A coreference chain of one image.

    ``kind`` is ``object`` (one box), ``group`` (several boxes), ``scene``, ``nobox``,
    ``notvisual`` (chain id 0) or ``unrelated`` (in an unrelated caption: not boxed).
    """

    id: int
    types: tuple
    kind: str
    objects: tuple = ()


@dataclass
class PhraseOcc:
    """One phrase occurrence (words as written) of a chain."""

    chain: Chain
    words: list


@dataclass
class ChainBook:
    """Chains of one image, created on first mention with ids from a dataset-wide counter."""

    next_id: Callable[[], int]
    chains: list = field(default_factory=list)
    _by_key: dict = field(default_factory=dict)

    def get(self, key, types: tuple, kind: str, objects: tuple = ()) -> Chain:
        if key not in self._by_key:
            cid = 0 if kind == "notvisual" else self.next_id()
            chain = Chain(cid, types, kind, objects)
            self._by_key[key] = chain
            if kind != "notvisual":
                self.chains.append(chain)
        return self._by_key[key]


def render_caption(segments: list) -> tuple:
    """Render segments (str or :class:`PhraseOcc`) with the first word capitalized.

    Returns
    -------
    (markup, stripped, phrases)
        The ``[/EN#id/type words]`` line, the caption without markup, and a list of
        ``(first_word_index, PhraseOcc)``.
    """
    parts, words, phrases = [], [], []
    for k, seg in enumerate(segments):
        if isinstance(seg, str):
            text = seg[:1].upper() + seg[1:] if k == 0 else seg
            parts.append(text)
            words += text.split()
        else:
            pw = list(seg.words)
            if k == 0:
                pw[0] = pw[0][:1].upper() + pw[0][1:]
            seg.words = pw
            phrases.append((len(words), seg))
            words += pw
            parts.append(f"[/EN#{seg.chain.id}/{'/'.join(seg.chain.types)} {' '.join(pw)}]")
    return " ".join(parts), " ".join(words), phrases


class ObjectPhrase(PhraseOcc):
    """A phrase naming one object, written from what it says of it (article, size, colour, shape,
    or a generic noun such as "shape"/"object" when the shape is not said), so that it can say more.
    Each attribute is named once, by ``namer`` (:class:`.language.Namer`), when it is first said."""

    def __init__(self, chain: Chain, obj_index: int, obj, article: str, size: bool, colour: bool, shape: bool,
                 noun: str = "shape", namer: Namer = None):
        self.obj_index, self.obj, self.article, self.noun = obj_index, obj, article, noun
        self.namer = namer or V3.namer(None, "train")
        self.says = {"size": size, "colour": colour, "shape": shape}
        self.names = {}
        super().__init__(chain, [])
        self.refresh()

    def _name(self, kind: str) -> str:
        if kind not in self.names:
            o, namer = self.obj, self.namer
            self.names[kind] = {"size": lambda: namer.size(o.size), "colour": lambda: namer.colour(o.colour),
                                "shape": lambda: namer.shape(o.shape),
                                "noun": lambda: namer.generic(o.shape, self.noun)}[kind]()
        return self.names[kind]

    def refresh(self) -> None:
        says = self.says
        self.words = [self.article] + [self._name("size")] * says["size"] + [self._name("colour")] * says["colour"] + [
            self._name("shape" if says["shape"] else "noun")]

    def unsaid(self) -> list:
        """The attributes it does not say yet."""
        return [k for k, v in self.says.items() if not v]

    def say(self, attribute: str) -> None:
        self.says[attribute] = True
        self.refresh()


@dataclass
class Draft:
    """One caption being written: its segments (without the final "."), the object phrases that
    may say more or be placed, and whether the background is mentioned."""

    segments: list
    phrases: list = field(default_factory=list)
    open_phrases: list = field(default_factory=list)
    placed: set = field(default_factory=set)
    has_scene: bool = False

    def markup(self) -> str:
        return render_caption(self.segments + ["."])[0]


class CaptionWriter:
    """Writes the five captions of one scene, each specific enough to pick its image out.

    Every caption starts from a template (caption 0 lists every object; the others mention the
    group, a shadow, or one or two objects with a position or a relation). While the facts it
    states (:func:`.facts.caption_facts`) are true of another scene of the split (``index``), or
    are those of an earlier caption of the scene, it says more, one step at a time, at random
    among the steps left: a phrase adds its object's size, colour or shape; an object is placed
    ("on the left"); the background is named; another object is mentioned with its place.
    Phrases of ``cs_combos`` in caption 0 stay as they are.

    Parameters
    ----------
    scene : Scene
        A rendered scene (object boxes set).
    rng : numpy.random.Generator
    book : ChainBook
        Receives the chains mentioned.
    cs_combos : tuple
        Combinations whose objects are called "<colour> <shape>" in caption 0 (the rare
        combinations in training, so each of their phrases gets at least one training count).
    index : FactIndex, optional
        The scenes of the split; without it captions keep their templates.
    position : int, optional
        This scene's position in ``index``.
    namer : Namer, optional
        Names the attributes (:mod:`.language`; default: version 3's words). Its language also
        reads the drafts back into facts.
    """

    #: Most steps a caption takes to say more.
    MAX_STEPS = 12

    def __init__(self, scene: Scene, rng: np.random.Generator, book: ChainBook, cs_combos=(),
                 index: Optional[FactIndex] = None, position: Optional[int] = None, namer: Optional[Namer] = None):
        self.scene, self.rng, self.book = scene, rng, book
        self.namer = namer or V3.namer(None, "train")
        self.cs_combos = set(cs_combos)
        self.objs = scene.objects
        self.index, self.position = index, position
        self.group, self.group_kind = self._find_group()
        self.draft, self.stated = None, set()

    # ---- chains and phrases -------------------------------------------------------------
    def _find_group(self) -> tuple:
        for kind, key in (("combo", lambda o: o.combo), ("colour", lambda o: o.colour),
                          ("shape", lambda o: o.shape)):
            seen = {}
            for i, o in enumerate(self.objs):
                seen.setdefault(key(o), []).append(i)
            for o in self.objs:
                members = seen[key(o)]
                if len(members) >= 2:
                    return tuple(members), kind
        return (), None

    def _choice(self, options):
        return options[int(self.rng.integers(len(options)))]

    def _unique(self, i: int, key) -> bool:
        return sum(key(o) == key(self.objs[i]) for o in self.objs) == 1

    def obj_phrase(self, i: int, style: Optional[str] = None, locked: bool = False) -> ObjectPhrase:
        """A noun phrase for object ``i``; the style is random among those that identify it.
        It joins the draft's phrases that may say more unless ``locked``."""
        o = self.objs[i]
        if style is None:
            keys = {"cs": lambda x: x.combo, "zcs": lambda x: (x.size, x.colour, x.shape),
                    "s": lambda x: x.shape, "cshape": lambda x: x.colour,
                    "zs": lambda x: (x.size, x.shape)}
            ok = np.array([self._unique(i, keys[s]) for s in STYLES], dtype=float)
            weights = np.asarray(self.namer.language.style_weights or STYLE_WEIGHTS)
            w = weights * ok if ok.any() else weights * np.array([1, 1, 0, 0, 0])
            style = STYLES[int(self.rng.choice(len(STYLES), p=w / w.sum()))]
        art = self._choice(("a", "the"))
        noun = self._choice(("shape", "shape", "shape", "object")) if style == "cshape" else "shape"
        chain = self.book.get(("obj", i), ("other",), "object", (i,))
        occ = ObjectPhrase(chain, i, o, art, size=style in ("zcs", "zs"), colour=style in ("cs", "zcs", "cshape"),
                           shape=style != "cshape", noun=noun, namer=self.namer)
        if self.draft is not None:
            self.draft.phrases.append(occ)
            if not locked:
                self.draft.open_phrases.append(occ)
        return occ

    def group_phrase(self) -> PhraseOcc:
        o = self.objs[self.group[0]]
        num = NUMBERS[len(self.group)]
        C, S = "<colour>", "<shapes>"  # named below, after the template is chosen
        if self.group_kind == "combo":
            opts = ([num, C, S], ["the", C, S], ["the", num, C, S])
        elif self.group_kind == "colour":
            opts = ([num, C, "shapes"], ["the", C, "shapes"], [num, C, "objects"])
        else:
            opts = ([num, S], ["the", S])
        names = {C: lambda: self.namer.colour(o.colour), S: lambda: self.namer.shape(o.shape, many=True),
                 "shapes": lambda: self.namer.generic(None, "shape", many=True),
                 "objects": lambda: self.namer.generic(None, "object", many=True)}
        words = [names[w]() if w in names else w for w in self._choice(opts)]
        chain = self.book.get(("group",), ("other",), "group", self.group)
        return PhraseOcc(chain, words)

    def scene_phrase(self) -> PhraseOcc:
        words = [self._choice(("a", "the")), self.namer.background(self.scene.background),
                 self.namer.background_noun(self._choice(("background", "backdrop")))]
        if self.draft is not None:
            self.draft.has_scene = True
        return PhraseOcc(self.book.get(("scene",), ("scene",), "scene"), words)

    def notvisual_phrase(self) -> PhraseOcc:
        return PhraseOcc(self.book.get(("nv",), ("notvisual",), "notvisual"),
                         self._choice(NOTVISUAL).split())

    def nobox_phrase(self) -> PhraseOcc:
        words = [self._choice(("a", "the")), self._choice(("faint", "soft", "long")), "shadow"]
        return PhraseOcc(self.book.get(("nobox",), ("other",), "nobox"), words)

    def pos(self, i: int, phrase: Optional[PhraseOcc] = None) -> str:
        """Position words of object ``i``; ``phrase``, the phrase they follow, is then placed."""
        if phrase is not None and self.draft is not None:
            self.draft.placed.add(id(phrase))
        where = self.scene.position(self.objs[i])
        return self.namer.position(where, self._choice(V3.positions_outside[where].names))

    def relation(self, i: int, j: int) -> Optional[str]:
        """"left of" / "right of" / "above" / "below" along the dominant axis (as the namer words
        it), or None."""
        rels = relations_between(self.objs[i].box_xyxy(), self.objs[j].box_xyxy()) - {"next to"}
        rel = next(iter(rels), None)
        return None if rel is None else self.namer.relation(rel)

    def next_to(self, i: int, j: int) -> bool:
        return "next to" in relations_between(self.objs[i].box_xyxy(), self.objs[j].box_xyxy())

    # ---- templates ----------------------------------------------------------------------
    def _listing(self, idx: list, style_for) -> list:
        segs = []
        for k, i in enumerate(idx):
            if k:
                segs.append("and" if k == len(idx) - 1 else ",")
            style = style_for(i)
            segs.append(self.obj_phrase(i, style, locked=style is not None))
        return segs

    def caption_all(self) -> list:
        """Caption 0: mentions every object."""
        idx = list(range(len(self.objs)))
        style_for = lambda i: "cs" if self.objs[i].combo in self.cs_combos else None  # noqa: E731
        form = int(self.rng.integers(3))
        if form == 0:
            return self._listing(idx, style_for) + ["on", self.scene_phrase()]
        if form == 1:
            return [self.notvisual_phrase(), "shows"] + self._listing(idx, style_for)
        return self._listing(idx, style_for) + ["are shown on", self.scene_phrase()]

    def caption_group(self) -> list:
        others = [i for i in range(len(self.objs)) if i not in self.group]
        form = int(self.rng.integers(3 if others else 2))
        if form == 0:
            return [self.group_phrase(), "are on", self.scene_phrase()]
        if form == 1:
            return [self.notvisual_phrase(), "shows", self.group_phrase()]
        return [self.group_phrase(), "and", self.obj_phrase(self._choice(others))]

    def caption_shadow(self) -> list:
        i = int(self.rng.integers(len(self.objs)))
        return [self.obj_phrase(i), "casts", self.nobox_phrase()]

    def caption_random(self) -> list:
        n = len(self.objs)
        i = int(self.rng.integers(n))
        j = (i + 1 + int(self.rng.integers(n - 1))) % n
        rel = self.relation(i, j)
        form = int(self.rng.integers(7))
        if form == 6:
            near = [k for k in range(n) if k != i and self.next_to(i, k)]
            if near:
                return [self.obj_phrase(i), "is", self.namer.relation("next to"), self.obj_phrase(self._choice(near))]
            form = 2
        x = self.obj_phrase(i)
        if form == 0:
            return [x, "is", self.pos(i, x)]
        if form == 1:
            return ["there is", x, self.pos(i, x)]
        if form == 2 and rel:
            return [x, "is", rel, self.obj_phrase(j)]
        if form == 3 and rel:
            return [x, "is", rel, self.obj_phrase(j), "on", self.scene_phrase()]
        if form == 4:
            return ["in", self.notvisual_phrase(), ",", x, "is", self.pos(i, x)]
        if form == 5:
            return [x, "sits on", self.scene_phrase(), self.pos(i, x)]
        return [x, "is", self.pos(i, x)]

    def caption_unrelated(self) -> list:
        tmpl = UNRELATED_TEMPLATES[int(self.rng.integers(len(UNRELATED_TEMPLATES)))]
        segs = []
        for k, seg in enumerate(tmpl):
            if isinstance(seg, str):
                segs.append(seg)
            else:
                chain = self.book.get(("unrelated", k), seg[0], "unrelated")
                segs.append(PhraseOcc(chain, seg[1].split()))
        return segs

    # ---- saying more ----------------------------------------------------------------------
    def _steps(self) -> list:
        """The steps that can still make the draft say more, as (weight, action)."""
        d = self.draft
        say = self.namer.language.say_weight
        steps = [(say, lambda p=p, a=a: p.say(a)) for p in d.open_phrases for a in p.unsaid()]
        steps += [(1.0, lambda p=p: self._place(p)) for p in d.phrases if id(p) not in d.placed]
        if not d.has_scene:
            steps.append((1.0, lambda: d.segments.extend(["on", self.scene_phrase()])))
        named = {p.obj_index for p in d.phrases}
        steps += [(0.5, lambda k=k: self._add_object(k)) for k in range(len(self.objs)) if k not in named]
        return steps

    def _place(self, phrase: ObjectPhrase) -> None:
        k = next(n for n, s in enumerate(self.draft.segments) if s is phrase)
        self.draft.segments.insert(k + 1, self.pos(phrase.obj_index, phrase))

    def _add_object(self, k: int) -> None:
        phrase = self.obj_phrase(k, self.namer.language.added_object_style)
        self.draft.segments.extend(["with", phrase, self.pos(k, phrase)])

    def _vague(self) -> bool:
        """Whether the draft is true of another scene or says what an earlier caption said."""
        facts = caption_facts(self.draft.markup(), language=self.namer.language)
        return facts in self.stated or bool(self.index.true_of(facts, exclude=self.position))

    def write(self, template) -> list:
        """The segments of one caption: ``template()``, then steps while it is vague."""
        self.draft = Draft([])
        self.draft.segments = template()
        if self.index is not None:
            for _ in range(self.MAX_STEPS):
                if not self._vague():
                    break
                steps = self._steps()
                if not steps:
                    break
                w = np.array([s[0] for s in steps])
                steps[int(self.rng.choice(len(steps), p=w / w.sum()))][1]()
            self.stated.add(caption_facts(self.draft.markup(), language=self.namer.language))
        segments, self.draft = self.draft.segments + ["."], None
        return segments

    def captions(self, with_shadow: bool, unrelated_index: Optional[int]) -> list:
        """The five captions as segment lists.

        Caption 0 mentions every object; one of captions 1-4 mentions the group (if any),
        one the not-boxed shadow (if ``with_shadow``); ``unrelated_index`` (1-4 or None) is
        replaced by an unrelated caption, which is never made specific.
        """
        slots = [None] * 5
        slots[0] = "all"
        free = [k for k in range(1, 5) if k != unrelated_index]
        if unrelated_index is not None:
            slots[unrelated_index] = "unrelated"
        for wanted, present in (("group", bool(self.group)), ("shadow", with_shadow)):
            if present and free:
                k = free.pop(int(self.rng.integers(len(free))))
                slots[k] = wanted
        make = {"all": self.caption_all, "group": self.caption_group, "shadow": self.caption_shadow,
                None: self.caption_random}
        return [self.caption_unrelated() if s == "unrelated" else self.write(make[s]) for s in slots]


def referring_expressions(scene: Scene, i: int, rng: np.random.Generator, namer: Optional[Namer] = None) -> list:
    """1-3 distinct ReferIt-style expressions (lowercase, spatial words inside) for object ``i``,
    each named afresh by ``namer`` (default: version 3's words; a large object is "big").

    The bare shape name ("circle") is a candidate only when the shape is unique in the image.
    """
    o = scene.objects[i]
    where = scene.position(o)
    n = namer or V3.namer(None, "train")
    if n.language is V3:
        size = lambda: "big" if o.size == "large" else "small"  # noqa: E731
    else:
        size = lambda: n.size(o.size)  # noqa: E731
    colour, shape = (lambda: n.colour(o.colour)), (lambda: n.shape(o.shape))
    inside, adjective = (lambda: n.position_inside(where)), (lambda: n.position_adjective(where))
    candidates = [
        (0.40, f"{colour()} {shape()}"),
        (0.20, f"{colour()} {shape()} {inside()}"),
        (0.15, f"the {size()} {colour()} {shape()}"),
        (0.15, f"{adjective()} {colour()} {shape()}"),
        (0.10, f"{size()} {shape()} {inside()}"),
    ]
    if sum(x.shape == o.shape for x in scene.objects) == 1:
        candidates.append((0.30, shape()))
    p = np.array([w for w, _ in candidates])
    k = 1 + int(rng.choice(3, p=(0.2, 0.4, 0.4)))
    order = rng.choice(len(candidates), size=k, replace=False, p=p / p.sum())
    return [candidates[int(j)][1] for j in order]
