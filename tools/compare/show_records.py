#!/usr/bin/env python
"""The runs recorded so far by ``tools/compare/compare_retrieval.py`` / ``compare_pointing.py --record-root``,
one row each, without training anything:

    python tools/compare/show_records.py results/retrieval_compare [results/pointing_compare ...]

Each row: the run (``<representation>/seed<k>/<model>``), its test rsum and R@1 (and pointing
accuracy), its best validation iteration, minutes, and the commit and machine that made it
(phrasedet/engine/comparison/run_records.py). The comparisons themselves print the tables over seeds and the
verdicts once every run is in.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from phrasedet.engine.comparison.run_records import format_records, read_records  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("record_roots", nargs="+")
    args = p.parse_args(argv)
    for root in args.record_roots:
        if not os.path.isdir(root):
            sys.exit(f"{root}: no such folder of records")
        runs = read_records(root)
        print(f"{root}: {len(runs)} recorded run(s)\n")
        if runs:
            print(format_records(runs))
            print()


if __name__ == "__main__":
    main()
