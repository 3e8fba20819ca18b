"""Make nltk's WordNet corpus from a plain WordNet 3.0 database folder, for machines that cannot
run ``nltk.download("wordnet")``.

Debian's ``wordnet-base`` and ``wordnet-sense-index`` packages install that database in
``/usr/share/wordnet`` (``data.*``, ``index.*``, ``*.exc``, ``index.sense``). nltk reads the same
files from ``<nltk_data>/corpora/wordnet``, plus ``lexnames``, which Debian does not ship: it is
WordNet 3.0's fixed table of the 45 lexicographer files, written here.
"""
import os
import shutil

__all__ = ["DEBIAN_WORDNET_DIR", "LEXNAMES", "install_wordnet"]

DEBIAN_WORDNET_DIR = "/usr/share/wordnet"
_REQUIRED = [f"{kind}.{pos}" for kind in ("data", "index") for pos in ("noun", "verb", "adj", "adv")] + ["index.sense"]
# WordNet 3.0 lexicographer files, in file-number order; the syntactic category is 1 noun,
# 2 verb, 3 adjective, 4 adverb.
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
    "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
    "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
    "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
    "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
    "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_POS_NUMBER = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


def install_wordnet(nltk_data_dir, source_dir=DEBIAN_WORDNET_DIR):
    """Copy a WordNet 3.0 database into ``<nltk_data_dir>/corpora/wordnet`` and add ``lexnames``.

    Files are copied, not linked: nltk refuses corpus paths that resolve outside its data paths.

    Returns:
        the corpus folder.

    Raises:
        FileNotFoundError: naming the missing database files and the packages that provide them.
    """
    missing = [f for f in _REQUIRED if not os.path.isfile(os.path.join(source_dir, f))]
    if missing:
        raise FileNotFoundError(
            f"WordNet database files {missing} not found in {source_dir!r} (on Debian: "
            "apt-get install wordnet-base wordnet-sense-index)"
        )
    target = os.path.join(nltk_data_dir, "corpora", "wordnet")
    os.makedirs(target, exist_ok=True)
    for name in sorted(os.listdir(source_dir)):
        src = os.path.join(source_dir, name)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(target, name))
    if not os.path.isfile(os.path.join(target, "lexnames")):
        with open(os.path.join(target, "lexnames"), "w") as f:
            for i, name in enumerate(LEXNAMES):
                f.write(f"{i:02d}\t{name}\t{_POS_NUMBER[name.split('.')[0]]}\n")
    return target
