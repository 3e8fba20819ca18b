#!/usr/bin/env python
"""Do a word's vectors tell which colour, shape, size or background it names? The text side's
probe of a built-in world (issue 42; docs/DATA.md, "The long-tailed language"):

    python tools/evaluation/probe_word_vectors.py [--world long_tail] [--vectors glove_6b_50d word2vec]
        [--output-dir output/probe_word_vectors]

For each source of word vectors, every name of the world's language is classified by the nearest
prototype of the other names of each value that occur in the training captions
(phrasedet/evaluation/word_vector_probe.py). The table gives the accuracy per kind and group:
``head`` (a value's usual name), ``seen`` (another name that occurs in training) and ``unseen``
(never in a training caption). A name without a vector counts as wrong.

Sources (``--vectors``):

* ``glove_6b_50d``: the real GloVe 6B 50-d vectors, the long-tailed world's choice;
* ``word2vec``: word2vec trained on the world's training captions, as version 3's runs use it
  (``PHRASEDET.TEXT.WORD2VEC_*`` of configs/cite_cca.yaml; trained once, then cached);
* ``PATH``: a word2vec binary file.

``<output-dir>/probe_word_vectors.json`` keeps every name's row.
"""
import argparse
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

import phrasedet  # noqa: E402,F401  (registers the datasets)
from phrasedet.data.synthetic.language import get_language  # noqa: E402
from phrasedet.engine.comparison.protocol import config_of  # noqa: E402
from phrasedet.engine.comparison.worlds import WORLDS, get_world  # noqa: E402
from phrasedet.evaluation.word_vector_probe import GROUPS, KINDS, name_classes, probe_names, word_counts  # noqa: E402

CONFIG = os.path.join(ROOT, "configs", "cite_cca.yaml")


def load_vectors(source: str, world):
    """gensim ``KeyedVectors`` of ``source`` for ``world``'s runs."""
    from phrasedet.text.build import build_word_vectors

    if source in ("glove_6b_50d", "word2vec"):
        opts = [*world.phrase_detection_opts(), "PHRASEDET.TEXT.WORD_VECTORS", source]
    else:
        if not os.path.isfile(source):
            raise SystemExit(f"--vectors: no file {source}")
        opts = ["PHRASEDET.TEXT.WORD_VECTORS", "file", "PHRASEDET.TEXT.WORD_VECTORS_PATH", os.path.abspath(source),
                "PHRASEDET.TEXT.WORD_VECTORS_FORMAT", "word2vec_binary"]
    return build_word_vectors(config_of(CONFIG, opts))


def training_counts(world):
    """How often each word occurs in the world's training captions."""
    from detectron2.data import DatasetCatalog

    from phrasedet.text.word_vectors import caption_sentences

    return word_counts(caption_sentences(DatasetCatalog.get(world.dataset("flickr30k_entities_train"))))


def format_probe(results: dict) -> str:
    """Markdown: one row per (vectors, kind), accuracy per group as ``correct / names (%)``."""
    lines = ["| vectors | kind | " + " | ".join(f"{g} names" for g in GROUPS) + " | chance |",
             "|---|---|" + "---|" * (len(GROUPS) + 1)]
    for source, kinds in results.items():
        for kind, r in kinds.items():
            cells = [f"{x['correct']} / {x['names']} ({x['accuracy']:.0f} %)" if x["names"] else "-"
                     for x in (r["groups"][g] for g in GROUPS)]
            lines.append(f"| {source} | {kind} | " + " | ".join(cells) + f" | {r['chance']:.0f} % |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world", default="long_tail", choices=list(WORLDS))
    p.add_argument("--vectors", nargs="+", default=["glove_6b_50d", "word2vec"])
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    p.add_argument("--output-dir", default=os.path.join(ROOT, "output", "probe_word_vectors"))
    args = p.parse_args(argv)
    world = get_world(args.world)
    language, counts = get_language(world.language), training_counts(world)
    results = {}
    for source in args.vectors:
        kv = load_vectors(source, world)
        results[source] = {}
        for kind in args.kinds:
            classes, heads = name_classes(language, kind)
            results[source][kind] = probe_names(kv, classes, heads, counts)
    print(f"Word vectors against the {world.name} world's names (nearest prototype of the other names seen in "
          f"training; a name without a vector is wrong):\n")
    print(format_probe(results))
    for source, kinds in results.items():
        missing = sorted({r["name"] for x in kinds.values() for r in x["names"] if not r["has_vector"]})
        print(f"\n{source}: no vector for {', '.join(missing) if missing else 'no name'}")
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "probe_word_vectors.json"), "w") as f:
        json.dump({"world": world.name, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
