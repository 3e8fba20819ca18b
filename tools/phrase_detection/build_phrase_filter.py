#!/usr/bin/env python
"""Build the phrase filter of a phrase-detection test split with a trained retrieval model (paper
003 Sec. 6.2, ``phrasedet/engine/phrase_filtering.py``), print its recall, and save it:

    python tools/phrase_detection/build_phrase_filter.py --dataset builtin_flickr30k_entities_test \\
        --output output/phrase_filter/phrase_filter.json [--config-file configs/cite_cca.yaml] \\
        TEST.PHRASE_FILTER.RETRIEVAL_CONFIG configs/retrieval/two_branch.yaml \\
        TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS output/retrieval_compare/seed0/two_branch/model_final.pth \\
        TEST.PHRASE_FILTER.RETRIEVAL_OPTS "['MODEL.RETRIEVAL.IMAGE_INPUT', 'features', \\
            'MODEL.RETRIEVAL.BACKBONE_WEIGHTS', 'output/cite_cca/stage1_detector/model_final.pth']" \\
        TEST.PHRASE_FILTER.TOP_N 75

The file is what ``tools/evaluation/evaluate_predictions.py --phrase-filter`` and ``TEST.PHRASE_FILTER.FILE``
read. Prints the filter's recall (test instances whose phrase survives in their image, per
zero/few/common bucket), the share of (image, phrase) pairs kept, the distinct tokens of the
sentence database and those allowed per image, and the time spent; and, as a baseline, the same
rule's recall and pairs kept with ``TOP_N`` sentences drawn at random for each image (``--seed``):
a filter that keeps no fewer pairs than that is not selective because of its model.
"""
import argparse
import json
import logging
import sys
import time

import torch

import phrasedet  # noqa: F401  (registers the datasets and models)
from detectron2.config import get_cfg
from detectron2.utils.logger import setup_logger

from phrasedet.config import add_phrasedet_config
from phrasedet.data.statistics import training_vocabulary
from phrasedet.engine.phrase_filtering import build_phrase_filter, random_phrase_filter
from phrasedet.evaluation.phrase_detection.dataset import load_test_split, train_dataset_of
from phrasedet.text.vocab import BUCKETS


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", required=True, help="registered phrase-detection test split")
    p.add_argument("--output", required=True, help="where to write the filter (JSON)")
    p.add_argument("--config-file", default=None, help="a phrase-detection config (MODEL.DEVICE, TEST.PHRASE_FILTER)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random-sentences baseline")
    p.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE config overrides")
    args = p.parse_args(argv)
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    if args.config_file:
        cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    if not torch.cuda.is_available() and cfg.MODEL.DEVICE.startswith("cuda"):
        cfg.MODEL.DEVICE = "cpu"
    cfg.TEST.PHRASE_FILTER.FILE = ""  # this tool builds one
    start = time.perf_counter()
    try:
        phrase_filter = build_phrase_filter(cfg, args.dataset, output_path=args.output)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
    seconds = time.perf_counter() - start
    _, gt = load_test_split(args.dataset)
    vocabulary = training_vocabulary([train_dataset_of(args.dataset)], cfg.PHRASEDET.VOCAB.BUCKET_THRESHOLDS)
    stats = phrase_filter.statistics(gt, vocabulary)
    model = phrase_filter.retrieval_model
    baseline, database_tokens = random_phrase_filter(cfg, list(phrase_filter.tokens), seed=args.seed)
    chance = baseline.statistics(gt, vocabulary)
    summary = {"dataset": args.dataset, "top_n": phrase_filter.top_n, "num_images": gt.num_images,
               "recall": 100.0 * stats["recall"], **{f"recall_{b}": 100.0 * stats[f"recall_{b}"] for b in BUCKETS},
               "kept_pairs": 100.0 * stats["kept"], "database_tokens": database_tokens,
               "tokens_allowed_per_image": phrase_filter.mean_tokens(),
               "random_sentences": {"seed": args.seed, "recall": 100.0 * chance["recall"], "kept_pairs": 100.0 * chance["kept"],
                                    "tokens_allowed_per_image": baseline.mean_tokens()},
               "seconds_total": round(seconds, 2),
               "seconds_caption_embedding": model["caption_seconds"], "seconds_per_image": model["seconds_per_image"],
               "output": args.output}
    print(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    setup_logger(name="phrasedet")  # here, not in main(): main() called from other code leaves its logging alone
    logging.basicConfig(level=logging.INFO)
    main()
