#!/usr/bin/env python
"""Install nltk's WordNet corpus (needed by positive phrase augmentation, INPUT.PHRASES.PPA)
without downloading it, from a WordNet 3.0 database folder such as Debian's:

    apt-get install wordnet-base wordnet-sense-index
    python tools/setup/install_wordnet.py            # into ~/nltk_data, which nltk searches

Where the internet is reachable, `python -m nltk.downloader wordnet` does the same.
"""
import argparse
import os

from phrasedet.text.wordnet import DEBIAN_WORDNET_DIR, install_wordnet


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", default=DEBIAN_WORDNET_DIR, help="WordNet 3.0 dict folder (default: %(default)s)")
    parser.add_argument("--nltk-data", default=os.path.expanduser("~/nltk_data"), help="nltk data folder (default: %(default)s)")
    args = parser.parse_args()
    target = install_wordnet(args.nltk_data, args.source)
    import nltk

    nltk.data.path.insert(0, args.nltk_data)
    from nltk.corpus import wordnet

    print(f"WordNet installed in {target}: {len(list(wordnet.all_synsets('n')))} noun synsets; "
          f"nltk finds it{'' if args.nltk_data in nltk.data.path[1:] else ' when NLTK_DATA=' + args.nltk_data + ' is set'}")


if __name__ == "__main__":
    main()
