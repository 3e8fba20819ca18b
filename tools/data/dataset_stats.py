#!/usr/bin/env python
"""Load the datasets of a config and print what is in them: images, boxes, phrase instances,
test phrases per zero/few/common bucket, the text pipeline's coverage of the test phrases, and,
for the built-in dataset, how specific its captions are.

    python tools/data/dataset_stats.py --config-file configs/Base-Builtin.yaml [--batch-size 64]
        [--specificity-root ROOT] [KEY VALUE ...]

With the built-in datasets the first run generates them (into $PHRASEDET_CACHE). Caption
specificity (docs/DATA.md): per split, of how many other images a caption is true, from the
facts it states checked on every scene by brute force (phrasedet/data/synthetic/specificity.py;
the generator's index is asked too, and a difference stops the tool with the caption named), in a
random batch of ``--batch-size`` images and over the whole split. It is measured on the built-in dataset
when the config names one (``builtin_*`` datasets), or on ``--specificity-root``, any folder the
generator wrote (tools/data/make_builtin_dataset.py).
"""
import argparse
import time

from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog
from detectron2.utils.logger import setup_logger
from tabulate import tabulate

import phrasedet  # noqa: F401  (registers the datasets)
from phrasedet.config import add_phrasedet_config
from phrasedet.data import PhraseDatasetMapper, training_vocabulary
from phrasedet.data.datasets.builtin import builtin_dataset_root, builtin_language_of
from phrasedet.data.statistics import bucket_statistics, split_statistics, unseen_word_statistics
from phrasedet.data.synthetic.specificity import dataset_specificity, format_specificity
from phrasedet.text.build import build_encoded_vocabulary, build_text_encoder
from phrasedet.text.vocab import BUCKETS


def setup(args):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    cfg.freeze()
    return cfg


def print_splits(names):
    rows = []
    stats = {name: split_statistics(DatasetCatalog.get(name)) for name in names}
    keys = sorted({k for s in stats.values() for k in s}, key=lambda k: (k.startswith("unboxed"), k))
    for name, s in stats.items():
        rows.append([name] + [s.get(k, 0) for k in keys])
    print(tabulate(rows, headers=["dataset"] + keys, tablefmt="github"))


def print_buckets(cfg):
    vocab = training_vocabulary(cfg.DATASETS.TRAIN, cfg.PHRASEDET.VOCAB.BUCKET_THRESHOLDS)
    print(f"\nTraining vocabulary: {len(vocab)} distinct phrases, {vocab.total} instances "
          f"(buckets by training count, thresholds {list(cfg.PHRASEDET.VOCAB.BUCKET_THRESHOLDS)})")
    for name in cfg.DATASETS.TEST:
        b = bucket_statistics(DatasetCatalog.get(name), vocab)
        print(f"\n{name}: test phrases per bucket, beside Flickr30K Entities' test split (paper 003, Table IV)")
        print(bucket_table(b))
        u = unseen_word_statistics(DatasetCatalog.get(name), vocab)
        words = ", ".join(u["unseen_words"][:10]) + (", ..." if len(u["unseen_words"]) > 10 else "")
        print(f"Zero-shot phrases with a word no training phrase has: {u['with_unseen_word']} of {u['phrases']} "
              f"({u['instances_with_unseen_word']} of {u['instances']} instances; words: {words or 'none'})")


#: Flickr30K Entities' test split per bucket (paper 003, Table IV): (distinct phrases, instances).
FLICKR30K_TEST_BUCKETS = {"zero_shot": (1783, 1860), "few_shot": (2764, 4373), "common": (472, 8248)}


def bucket_table(b):
    """A markdown table of :func:`bucket_statistics`' ``b``: phrases and instances per bucket and
    their shares, beside Flickr30K Entities' test split."""
    def share(part, whole):
        return f"{100 * part / whole:.1f} %" if whole else "-"

    phrases, instances = sum(b[k]["phrases"] for k in BUCKETS), sum(b[k]["instances"] for k in BUCKETS)
    fp, fi = (sum(v[i] for v in FLICKR30K_TEST_BUCKETS.values()) for i in (0, 1))
    rows = [[k, b[k]["phrases"], share(b[k]["phrases"], phrases), b[k]["instances"], share(b[k]["instances"], instances),
             share(FLICKR30K_TEST_BUCKETS[k][0], fp), share(FLICKR30K_TEST_BUCKETS[k][1], fi)] for k in BUCKETS]
    rows.append(["total", phrases, "", instances, f"{instances / phrases:.1f} per phrase" if phrases else "-", fp,
                 f"{fi / fp:.1f} per phrase"])
    return tabulate(rows, headers=["bucket", "distinct phrases", "share", "instances", "share",
                                   "Flickr30K: phrases", "instances"], tablefmt="github")


def print_text(cfg):
    start = time.perf_counter()
    encoder = build_text_encoder(cfg)
    t_vectors = time.perf_counter() - start
    phrases = sorted({a["phrase"] for n in cfg.DATASETS.TEST for d in DatasetCatalog.get(n) for a in d["annotations"]})
    start = time.perf_counter()
    vocab = build_encoded_vocabulary(cfg, phrases, encoder)
    t_encode = time.perf_counter() - start
    oov = encoder.oov
    print(f"\nText: {cfg.PHRASEDET.TEXT.WORD_VECTORS} word vectors ({len(encoder.kv)} words, "
          f"dim {encoder.kv.vector_size}; {t_vectors:.1f} s), {cfg.PHRASEDET.TEXT.ENCODER} encoder "
          f"(dim {encoder.dim}); {len(vocab)} test phrases encoded in {t_encode:.2f} s; "
          f"OOV tokens {oov.n_oov_tokens}/{oov.n_tokens}, phrases without a known word {oov.n_empty_phrases}")


def print_mapper_sample(cfg):
    mapper = PhraseDatasetMapper(cfg, is_train=True)
    d = mapper(DatasetCatalog.get(cfg.DATASETS.TRAIN[0])[0])
    inst = d["instances"]
    print(f"\nMapper sample ({d['file_name']}): image {tuple(d['image'].shape)}, {len(inst)} gt boxes, "
          f"phrases {d['phrases']}, gt_phrase_ids {inst.gt_phrase_ids.tolist()}")


def print_specificity(cfg, root, batch_size):
    """The caption-specificity table of a built-in dataset root (the config's, or ``root``)."""
    names = list(cfg.DATASETS.TRAIN) + list(cfg.DATASETS.TEST)
    languages = [builtin_language_of(n) for n in names if builtin_language_of(n) is not None]
    if not root and languages:
        root = builtin_dataset_root(languages[0])
    if not root:
        print("\nCaption specificity: only for the built-in dataset (no builtin_* dataset here; see --specificity-root)")
        return
    start = time.perf_counter()
    table = format_specificity(dataset_specificity(root, batch_size))
    print(f"\nCaption specificity of {root} ({time.perf_counter() - start:.1f} s): other images of its split a caption "
          f"is true of, from the facts it states, every scene checked (brute force; the index agrees) (docs/DATA.md)")
    print(table)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-file", required=True)
    parser.add_argument("--batch-size", type=int, default=64, help="the batch of the specificity measure")
    parser.add_argument("--specificity-root", default="", help="a built-in dataset folder to measure instead of the config's")
    parser.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE config overrides")
    args = parser.parse_args(argv)
    setup_logger(name="phrasedet")
    cfg = setup(args)
    print_splits(list(cfg.DATASETS.TRAIN) + list(cfg.DATASETS.TEST))
    print_buckets(cfg)
    print_text(cfg)
    print_mapper_sample(cfg)
    print_specificity(cfg, args.specificity_root, args.batch_size)


if __name__ == "__main__":
    main()
