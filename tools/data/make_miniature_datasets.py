#!/usr/bin/env python
"""Write the miniature of every real dataset (the test suite's, tests/realdata/miniature.py) to a
folder, to try a real-data config on a laptop before downloading anything:

    python tools/data/make_miniature_datasets.py /tmp/mini
    PHRASEDET_DATASETS=/tmp/mini python tools/train_net.py \\
        --config-file configs/retrieval/vsepp_gru_precomp_coco.yaml MODEL.DEVICE cpu SOLVER.MAX_ITER 2

A few tiny images per split in the upstream formats and layout (docs/DATA.md, "The miniature
tree"); numbers computed on it mean nothing. Run from the repository (it reads tests/).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from tests.realdata.miniature import EXPECTED_IMAGES, build_miniature  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("output_dir", help="the folder to use as $PHRASEDET_DATASETS (created)")
    args = p.parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    if os.listdir(args.output_dir):
        sys.exit(f"error: {args.output_dir} is not empty")
    build_miniature(args.output_dir)
    print(f"wrote the miniature datasets ({len(EXPECTED_IMAGES)} registered splits) to {args.output_dir}; "
          f"use PHRASEDET_DATASETS={args.output_dir}")


if __name__ == "__main__":
    main()
