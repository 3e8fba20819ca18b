#!/usr/bin/env python
"""Evaluate image-sentence retrieval from saved embeddings or a score matrix (docs/EVALUATION.md).

    python tools/evaluation/evaluate_retrieval.py --embeddings out/retrieval_embeddings.npz [--folds 1 5]
    python tools/evaluation/evaluate_retrieval.py --scores out/retrieval_scores.npz [--folds 1 5]
    python tools/evaluation/evaluate_retrieval.py --scores sims.npy --caption-to-image c2i.npy
    python tools/evaluation/evaluate_retrieval.py --scores sims.npy --dataset coco_karpathy_test
        [--chunk-size 1024] [--output results.json]

``--embeddings``: the ``RetrievalEvaluator``'s ``retrieval_embeddings.npz`` (dot-product scores).
``--scores``: a ``.npz`` with ``scores`` [N, M] (the evaluator's ``retrieval_scores.npz``), or a
bare ``.npy`` [N, M]. The image of each caption comes from the file's ``caption_to_image``,
``--caption-to-image`` (a ``.npy`` of M integers) or ``--dataset`` (a registered split: captions
image by image in record order); given twice, they must agree. Prints the table; ``--output``
writes the results dict as JSON. The numbers equal the in-loop evaluator's (same code, same
``--folds`` and ``--chunk-size``).
"""
import argparse
import json
import logging
import os
import sys

import numpy as np

import phrasedet  # noqa: F401  (registers the datasets; must come before the catalog lookups)
from phrasedet.fileio import BadFileError, load_array_file
from phrasedet.evaluation.retrieval import (caption_to_image_of, check_caption_to_image, evaluate_retrieval,
                                            evaluate_similarity, format_retrieval_table, load_embeddings,
                                            load_retrieval_split, load_scores)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--embeddings", help="retrieval_embeddings.npz (image_ids, images, captions, caption_to_image)")
    source.add_argument("--scores", help="score matrix [images, captions]: .npz with key 'scores', or .npy")
    parser.add_argument("--caption-to-image", help=".npy of M integers: the image (row) of each caption (column)")
    parser.add_argument("--dataset", help="registered retrieval split whose records give image ids and caption counts")
    parser.add_argument("--folds", type=int, nargs="+", default=[1],
                        help="protocols: 1 = all images, F = F folds of consecutive images averaged (COCO 1K: 5)")
    parser.add_argument("--chunk-size", type=int, default=1024, help="images scored at a time (memory bound)")
    parser.add_argument("--output", help="write the results dict here (JSON)")
    return parser.parse_args(argv)


def _agree(path: str, key: str, from_file, name: str, other) -> None:
    """ValueError unless ``from_file`` (key ``key`` of ``path``) equals ``other`` (from ``name``)."""
    if from_file is None:
        return
    a, b = np.asarray(from_file), np.asarray(other)
    if len(a) != len(b):
        raise ValueError(f"{path}: key {key!r} has {len(a)} entries, {name} {len(b)}")
    differ = np.flatnonzero(a != b)
    if len(differ):
        k = int(differ[0])
        raise ValueError(f"{path}: key {key!r} differs from {name} at {len(differ)} entries, "
                         f"first at entry {k}: {a[k].item()!r} vs {b[k].item()!r}")


def _from_dataset(path: str, data: dict, dataset: str, num_images: int, num_captions: int) -> np.ndarray:
    """caption_to_image of ``dataset``, checked against the file's shape, image ids and caption_to_image."""
    image_ids, counts = load_retrieval_split(dataset)
    if (len(image_ids), int(counts.sum())) != (num_images, num_captions):
        raise ValueError(f"{path}: {num_images} images x {num_captions} captions, but dataset {dataset!r} has "
                         f"{len(image_ids)} images x {int(counts.sum())} captions")
    _agree(path, "image_ids", data.get("image_ids"), f"the image ids of dataset {dataset!r}", image_ids)
    c2i = caption_to_image_of(counts)
    _agree(path, "caption_to_image", data.get("caption_to_image"), f"dataset {dataset!r}", c2i)
    return c2i


def _from_npy(path: str, data: dict, c2i_path: str, num_images: int, num_captions: int) -> np.ndarray:
    """caption_to_image of the ``--caption-to-image`` file (a .npy), checked against the shape of ``path``."""
    array = load_array_file(c2i_path, "--caption-to-image file")
    if not isinstance(array, np.ndarray):
        array.close()
        raise BadFileError(f"{c2i_path}: --caption-to-image must be a .npy of {num_captions} integers, got a .npz")
    try:
        c2i = check_caption_to_image(array, num_images, num_captions)
    except ValueError as e:
        raise BadFileError(f"{c2i_path}: {e} (for {path}: {num_images} images x {num_captions} captions)") from None
    _agree(path, "caption_to_image", data.get("caption_to_image"), c2i_path, c2i)
    return c2i


def caption_to_image(args, path: str, data: dict, num_images: int, num_captions: int) -> np.ndarray:
    """The caption -> image index [M] from ``--caption-to-image``, ``--dataset`` or the file."""
    c2i = data.get("caption_to_image")
    if args.caption_to_image:
        c2i = _from_npy(path, data, args.caption_to_image, num_images, num_captions)
    if args.dataset:
        given = _from_dataset(path, data, args.dataset, num_images, num_captions)
        _agree(args.caption_to_image or path, "caption_to_image", c2i, f"dataset {args.dataset!r}", given)
        c2i = given
    if c2i is None:
        raise ValueError(f"{path}: missing key 'caption_to_image': give --caption-to-image or --dataset")
    return c2i


def evaluate(args) -> tuple:
    """``(results, source path, N, M)`` for the parsed arguments."""
    if args.embeddings:
        path, data = args.embeddings, load_embeddings(args.embeddings)
        n, m = len(data["images"]), len(data["captions"])
        c2i = caption_to_image(args, path, data, n, m)
        return evaluate_retrieval(data["images"], data["captions"], c2i, args.folds,
                                  chunk_size=args.chunk_size), path, n, m
    path, data = args.scores, load_scores(args.scores)
    n, m = data["scores"].shape
    c2i = caption_to_image(args, path, data, n, m)
    return evaluate_similarity(data["scores"], c2i, args.folds, args.chunk_size, data.get("gt_scores")), path, n, m


def main(argv=None) -> dict:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        results, path, n, m = evaluate(args)
    except (ValueError, FileNotFoundError, KeyError) as e:
        sys.exit(f"error: {e}")
    print(f"Retrieval on {path} ({n} images, {m} captions), in %:")
    print(format_retrieval_table(results))
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
        print(f"wrote {args.output}")
    return results


if __name__ == "__main__":
    main()
