#!/usr/bin/env python
"""Load the datasets of a config and print what is in them: images, boxes, phrase instances,
test phrases per zero/few/common bucket, and the text pipeline's coverage of the test phrases.

    python tools/dataset_stats.py --config-file configs/Base-Builtin.yaml [KEY VALUE ...]

With the built-in datasets the first run generates them (into $PHRASEDET_CACHE).
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
from phrasedet.data.statistics import bucket_statistics, split_statistics
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
        rows = [[k, b[k]["phrases"], b[k]["instances"]] for k in BUCKETS]
        rows.append(["total", sum(r[1] for r in rows), sum(r[2] for r in rows)])
        print(f"\n{name}: test phrases per bucket")
        print(tabulate(rows, headers=["bucket", "distinct phrases", "instances"], tablefmt="github"))


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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-file", required=True)
    parser.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE config overrides")
    args = parser.parse_args()
    setup_logger(name="phrasedet")
    cfg = setup(args)
    print_splits(list(cfg.DATASETS.TRAIN) + list(cfg.DATASETS.TEST))
    print_buckets(cfg)
    print_text(cfg)
    print_mapper_sample(cfg)


if __name__ == "__main__":
    main()
