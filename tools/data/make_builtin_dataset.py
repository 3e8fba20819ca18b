#!/usr/bin/env python
"""Generate the built-in synthetic dataset (Flickr30K Entities + refclef formats) and print its summary.

Example::

    python tools/data/make_builtin_dataset.py --root datasets/builtin --seed 0

Without ``--root`` the dataset goes to the cache used by ``ensure_builtin_dataset``
(``$PHRASEDET_CACHE`` or ``~/.cache/phrasedet``).
"""
import argparse
import json
import logging
import sys

from phrasedet.data.synthetic import DEFAULT_SIZES, ensure_builtin_dataset, generate_builtin_dataset
from phrasedet.data.synthetic.language import LANGUAGES


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", help="output folder (default: the ensure_builtin_dataset cache)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-train", type=int, default=DEFAULT_SIZES["train"])
    p.add_argument("--num-val", type=int, default=DEFAULT_SIZES["val"])
    p.add_argument("--num-test", type=int, default=DEFAULT_SIZES["test"])
    p.add_argument("--language", default="v3", choices=sorted(LANGUAGES),
                   help="the captions' words: v3 (one name per value) or long_tail (docs/DATA.md)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    return p.parse_args(argv)


def format_summary(s: dict) -> str:
    """Human-readable summary of ``generate_builtin_dataset``'s result."""
    lines = [f"built-in dataset v{s['generator_version']} seed {s['seed']}"
             + (f" in {s['root']}" if s.get("root") else "")
             + (f" ({s['seconds']:.1f} s)" if "seconds" in s else ""),
             f"  images {s['images']}, boxes {s['boxes']}, phrase occurrences {s['phrase_occurrences']} "
             f"(box targets {s['box_target_occurrences']}), chains {s['chains']} "
             f"(multi-box {s['multi_box_chains']}), boxes in two chains {s['shared_boxes']}, "
             f"unrelated captions {s['unrelated_captions']}",
             "  unboxed phrases: " + ", ".join(f"{k} {v}" for k, v in s["unboxed_by_reason"].items())]
    for split, d in s["splits"].items():
        lines.append(f"  {split:5s}: {d['images']} images, {d['boxes']} boxes, "
                     f"{d['box_target_phrases']} box-target phrases, {d['unboxed_phrases']} unboxed, "
                     f"{d['ref_sentences']} refclef sentences")
    for name, key in (("flickr30k_entities", "buckets"), ("refclef", "refclef_buckets")):
        lines.append(f"  {name} test buckets (distinct phrases / test instances): " + ", ".join(
            f"{b} {v['phrases']}/{v['test_instances']}" for b, v in s[key].items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if args.root:
        summary = generate_builtin_dataset(args.root, seed=args.seed, num_train=args.num_train,
                                           num_val=args.num_val, num_test=args.num_test, language=args.language)
    else:
        root = ensure_builtin_dataset(seed=args.seed, num_train=args.num_train,
                                      num_val=args.num_val, num_test=args.num_test, language=args.language)
        with open(f"{root}/ground_truth.json", encoding="utf-8") as f:
            summary = dict(json.load(f)["summary"], root=root)
    print(json.dumps(summary, indent=1) if args.json else format_summary(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
