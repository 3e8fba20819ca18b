"""A second, independent count of how specific the built-in captions are, for checking
phrasedet/data/synthetic/specificity.py (and the FactIndex behind the generator) on the data the
project itself generates.

Nothing here imports phrasedet's caption facts, markup parser or index. Each caption is read with
a regular expression into a list of tokens, turned into predicates over a scene (closures, not
fact tuples), and checked against every other scene of its split; the in-batch figures use
``math.comb`` directly. The reading of the captions follows the grammar the generator writes
(docs/DATA.md, "What a caption states"):

* ``[/EN#n/scene ... <background colour> ...]``: the background has that colour;
* ``[/EN#n/other ...]`` naming a colour, a shape or a generic noun (shape/object, plural or
  not): an object mention; singular mentions need one matching object, numbered plurals exactly
  that many, other plurals at least two;
* a position ("on the left", "in the middle", ...) after a singular mention, not yet placed,
  adds the position to the last mention (even with a scene phrase in between);
* a relation word ("left of", "above", "next to", ...) between two singular mentions relates two
  different objects, one matching each (after all positions are read).
"""
import json
import math
import os
import re

PHRASE = re.compile(r"\[/EN#\d+/([^\s\]]+) ([^\]]*)\]")
COLOURS = {"red", "green", "blue", "yellow", "purple", "orange", "white", "black"}
SHAPES = {"circle", "square", "triangle", "star", "cross", "diamond"}
PLURAL_SHAPES = {"circles": "circle", "squares": "square", "triangles": "triangle", "stars": "star",
                 "crosses": "cross", "diamonds": "diamond"}
BACKGROUND_COLOURS = {"gray", "brown", "teal", "pink"}
SIZES = {"small": "small", "large": "large", "big": "large"}
NUMBERS = {"two": 2, "three": 3, "four": 4}
PLACES = [("on the left", "left"), ("on the right", "right"), ("at the top", "top"), ("at the bottom", "bottom"),
          ("in the center", "center"), ("in the middle", "center")]
RELATIONS = [("left of", "left of"), ("right of", "right of"), ("above", "above"), ("below", "below"),
             ("next to", "next to")]


def tokens(markup):
    """("phrase", types, words) and ("text", words) items of one markup line, lower case."""
    out, at = [], 0
    for m in PHRASE.finditer(markup):
        out.append(("text", markup[at:m.start()].lower()))
        out.append(("phrase", m.group(1).split("/"), m.group(2).lower().split()))
        at = m.end()
    out.append(("text", markup[at:].lower()))
    return out


def text_cues(text):
    """The place and relation cues of a stretch of plain text, in order."""
    words = " ".join(w.strip(",.") for w in text.split())
    cues = []
    for i in range(len(words.split())):
        rest = " ".join(words.split()[i:]) + " "
        for said, place in PLACES:
            if rest.startswith(said + " "):
                cues.append(("place", place, i))
        for said, rel in RELATIONS:
            if rest.startswith(said + " "):
                cues.append(("relation", rel, i))
    # a word can start only one cue, and cues never overlap in this grammar
    return [(kind, value) for kind, value, _ in sorted(cues, key=lambda c: c[2])]


def mention(words):
    """{"attrs", "plural", "number"} of an object phrase, or None if it names no object."""
    attrs, plural, number, noun = {}, False, None, False
    for w in words:
        if w in COLOURS:
            attrs["colour"] = w
        elif w in SIZES:
            attrs["size"] = SIZES[w]
        elif w in SHAPES:
            attrs["shape"], noun = w, True
        elif w in PLURAL_SHAPES:
            attrs["shape"], plural, noun = PLURAL_SHAPES[w], True, True
        elif w in ("shape", "object"):
            noun = True
        elif w in ("shapes", "objects"):
            plural, noun = True, True
        elif w in NUMBERS:
            number = NUMBERS[w]
    if not noun and "colour" not in attrs:
        return None
    return {"attrs": attrs, "plural": plural, "number": number}


def predicates(markup):
    """Closures ``scene -> bool`` whose conjunction is what the caption says."""
    backgrounds, mentions, related = [], [], []
    last, pending = None, None
    for item in tokens(markup):
        if item[0] == "phrase":
            types, words = item[1], item[2]
            if "scene" in types:
                backgrounds += [w for w in words if w in BACKGROUND_COLOURS]
            elif "other" in types:
                m = mention(words)
                if m is not None:
                    mentions.append(m)
                    if pending and last is not None and not last["plural"] and not m["plural"]:
                        related.append((last, pending, m))
                    last, pending = m, None
            continue
        for kind, value in text_cues(item[1]):
            if kind == "place" and last is not None and not last["plural"] and "position" not in last["attrs"]:
                last["attrs"]["position"] = value
            elif kind == "relation":
                pending = value
    preds = [lambda s, b=b: s["background"] == b for b in backgrounds]
    for m in mentions:
        preds.append(lambda s, m=m: _count_ok(m, sum(_fits(m["attrs"], o) for o in s["objects"])))
    for a, rel, b in related:
        preds.append(lambda s, a=a, rel=rel, b=b: any(
            _fits(a["attrs"], x) and _fits(b["attrs"], y) and _related(x["box"], rel, y["box"])
            for ix, x in enumerate(s["objects"]) for iy, y in enumerate(s["objects"]) if ix != iy))
    return preds


def _fits(attrs, obj):
    return all(obj[k] == v for k, v in attrs.items())


def _count_ok(m, n):
    if not m["plural"]:
        return n >= 1
    return n == m["number"] if m["number"] is not None else n >= 2


def _related(a, rel, b):
    """``a rel b`` for continuous boxes: the dominant axis of the centres (x on a tie), 10 px at
    least; "next to" when the gap is at most 12 px along both axes."""
    dx = (b[0] + b[2]) / 2 - (a[0] + a[2]) / 2
    dy = (b[1] + b[3]) / 2 - (a[1] + a[3]) / 2
    if rel == "next to":
        return max(max(a[0], b[0]) - min(a[2], b[2]), max(a[1], b[1]) - min(a[3], b[3])) <= 12
    if max(abs(dx), abs(dy)) < 10:
        return False
    if abs(dx) >= abs(dy):
        return rel == ("left of" if dx > 0 else "right of")
    return rel == ("above" if dy > 0 else "below")


def count_split(root, split, batch_size=64):
    """(mean in batch, share in batch, mean in split, share in split, most, captions counted) of
    one split, unrelated captions left out."""
    with open(os.path.join(root, "ground_truth.json"), encoding="utf-8") as f:
        images = json.load(f)["images"]
    flickr = os.path.join(root, "flickr30k_entities")
    with open(os.path.join(flickr, f"{split}.txt"), encoding="utf-8") as f:
        ids = [line.strip() for line in f if line.strip()]
    scenes = [images[i] for i in ids]
    n, ks = len(ids), []
    for pos, image_id in enumerate(ids):
        with open(os.path.join(flickr, "Sentences", f"{image_id}.txt"), encoding="utf-8") as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        for c, line in enumerate(lines):
            if c in images[image_id]["unrelated_captions"]:
                continue
            preds = predicates(line)
            ks.append(sum(1 for j, s in enumerate(scenes) if j != pos and all(p(s) for p in preds)))
    b = min(batch_size, n) - 1
    in_batch = [k * b / (n - 1) for k in ks]
    any_in_batch = [1 - math.comb(n - 1 - k, b) / math.comb(n - 1, b) if k else 0.0 for k in ks]
    return (sum(in_batch) / len(ks), sum(any_in_batch) / len(ks), sum(ks) / len(ks),
            sum(k > 0 for k in ks) / len(ks), max(ks), len(ks))
