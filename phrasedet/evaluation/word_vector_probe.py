"""The text side's probe (issue 42): does a word's vector tell which colour, shape, size or
background it names, for names seen in training and for names never seen?

A name is classified by the nearest prototype, by cosine similarity. A value's prototype is the
mean of the unit vectors of its *other* names that occur in the training captions. So a name is
never its own prototype, and an unseen name is placed only by what a model could have learned
from the names it saw. (A fitted classifier, such as a logistic regression, was tried and
dropped: with one to six names seen per value and one left out, it mostly predicts the value with
the most names, below the prototypes on every kind.) A name without a vector is counted as wrong; word2vec trained on the
captions has none for an unseen name. Names are grouped as:

* ``head``: a value's first name, the one it is usually called by (``red``);
* ``seen``: another name that occurs in the training captions (``crimson``);
* ``unseen``: a name that never occurs there: the held-out names, and rare names the draw missed.

The figures are in docs/DATA.md, "The long-tailed language", from ``tools/evaluation/probe_word_vectors.py``.
"""
from collections import Counter
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np

__all__ = ["GROUPS", "KINDS", "name_classes", "word_counts", "probe_names"]

GROUPS = ("head", "seen", "unseen")
KINDS = ("colour", "shape", "size", "background")


def name_classes(language, kind: str):
    """(classes, heads) of one kind of the language's names: ``classes`` maps each name to its
    value (``colour``: ``{"crimson": "red", ...}``), ``heads`` is the set of each value's first name."""
    tables = {"colour": language.colours, "shape": language.shapes, "size": language.sizes,
              "background": language.backgrounds}
    if kind not in tables:
        raise KeyError(f"no kind {kind!r} of names (known: {', '.join(tables)})")
    classes, heads = {}, set()
    for value, names in tables[kind].items():
        heads.add(names.names[0])
        for n in names.names:
            if classes.setdefault(n, value) != value:
                raise ValueError(f"{language.name}: the {kind} name {n!r} names both {classes[n]!r} and {value!r}")
    return classes, heads


def word_counts(sentences: Iterable[Sequence[str]]) -> Counter:
    """How often each word occurs in word lists (``caption_sentences`` of the training split)."""
    return Counter(w for s in sentences for w in s)


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def _training_set(kv, name: str, classes: Mapping[str, str], counts: Mapping[str, int]):
    """(unit vectors [N, D], values [N]) of the names other than ``name`` seen in training."""
    others = [o for o in classes if o != name and counts.get(o, 0) > 0 and o in kv]
    return np.stack([_unit(np.asarray(kv[o], dtype=np.float64)) for o in others]) if others else None, \
        [classes[o] for o in others]


def _predict(kv, name: str, classes: Mapping[str, str], counts: Mapping[str, int]) -> Optional[str]:
    """The value of the prototype nearest to ``name``'s unit vector (None without a vector)."""
    if name not in kv:
        return None
    x, y = _training_set(kv, name, classes, counts)
    if x is None:
        return None
    values = sorted(set(y))
    prototypes = np.stack([_unit(x[[i for i, t in enumerate(y) if t == value]].mean(axis=0)) for value in values])
    return values[int(np.argmax(prototypes @ _unit(np.asarray(kv[name], dtype=np.float64))))]


def probe_names(kv, classes: Mapping[str, str], heads, counts: Mapping[str, int]) -> dict:
    """Classify every name of ``classes`` by its vector in ``kv`` (gensim ``KeyedVectors`` or any
    mapping ``word -> vector`` with ``in``), each name left out of the prototypes that classify it.

    Returns ``{"names": [{"name", "value", "group", "train_count", "has_vector", "predicted"}],
    "groups": {group: {"names", "with_vector", "correct", "accuracy"}}, "chance"}``; accuracy and
    chance in %, accuracy None for an empty group.
    """
    rows = []
    for name in sorted(classes):
        group = "head" if name in heads else ("seen" if counts.get(name, 0) > 0 else "unseen")
        rows.append({"name": name, "value": classes[name], "group": group, "train_count": int(counts.get(name, 0)),
                     "has_vector": name in kv, "predicted": _predict(kv, name, classes, counts)})
    groups = {}
    for g in GROUPS:
        mine = [r for r in rows if r["group"] == g]
        correct = sum(r["predicted"] == r["value"] for r in mine)
        groups[g] = {"names": len(mine), "with_vector": sum(r["has_vector"] for r in mine), "correct": correct,
                     "accuracy": 100.0 * correct / len(mine) if mine else None}
    return {"names": rows, "groups": groups, "chance": 100.0 / len(set(classes.values()))}
