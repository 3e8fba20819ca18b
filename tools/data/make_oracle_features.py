#!/usr/bin/env python
"""Write the built-in dataset's oracle image representation (docs/DATA.md, "The oracle"):

    python tools/data/make_oracle_features.py --output-dir output/oracle [--grid 16]

``<output-dir>/global/<split>.npy``: per image, the number of objects matching each desc (every
subset of colour, shape, size and position) and the background's one-hot, [N, 1138], for any
``MODEL.RETRIEVAL.IMAGE_INPUT features`` config (``MODEL.RETRIEVAL.IMAGE_FEATURES_DIR <output-dir>/global``).
``<output-dir>/maps/<split>.npy``: [N, 1138, grid, grid] (uint8), each cell the descs of the
object that covers most of it (or the background's one-hot), for DSVE-loc (``MODEL.RETRIEVAL.IMAGE_INPUT maps
MODEL.RETRIEVAL.IMAGE_FEATURES_DIR <output-dir>/maps``). Written for the built-in caption splits
and the Flickr-side pointing splits; an upper bound, computed from the generator's ground truth,
never a model.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import phrasedet  # noqa: E402,F401  (registers the datasets)
from phrasedet.data.datasets.builtin import builtin_dataset_root  # noqa: E402
from phrasedet.data.synthetic.ground_truth import SPLITS, load_ground_truth  # noqa: E402
from phrasedet.data.synthetic.oracle import write_oracle_features  # noqa: E402

#: The splits the oracle is written for.
DATASETS = [f"builtin_flickr30k_captions_{s}" for s in SPLITS] + [f"builtin_flickr30k_pointing_{s}" for s in ("val", "test")]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--grid", type=int, default=16, help="cells per side of the maps (the built-in CNN's res4 at 128 px: 16)")
    args = p.parse_args(argv)
    dirs = write_oracle_features(args.output_dir, DATASETS, args.grid, load_ground_truth(builtin_dataset_root()))
    for kind, path in dirs.items():
        print(f"{kind}: {path}")


if __name__ == "__main__":
    main()
