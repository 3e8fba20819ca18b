"""Positive phrase augmentation (PPA, paper 003 Sec. 4.2) with WordNet synonyms and hypernyms.

Each word of a phrase may be replaced by a WordNet synonym or hypernym ("blue jacket" -> "blue
coat"); on Flickr30K Entities sub-phrases also count ("large red house" -> "red house",
"house"). Only candidates that already are phrases of the split are kept. ReferIt phrases hold
spatial relations, so there "left"/"right" are never replaced and no sub-phrases are made.
The released code's skip list and manual exclusions are reproduced.
"""
import itertools

__all__ = ["WordNetUnavailable", "WordNetLexicon", "PositivePhraseAugmenter", "ppa_style_of"]

_NO_HYPERNYMS = {"left", "right", "black", "white", "brown", "raft", "pot"}
_EXCLUDED = {
    "jacket": {"cap", "case", "dress"},
    "hair": {"fabric", "cloth", "material"},
    "skirt": {"girl", "ring", "doll", "bird"},
}
_FIXED_REFERIT_WORDS = {"left", "right"}
MAX_SUBPHRASE_TOKENS = 8  # 2^8 subsets at most per phrase


def ppa_style_of(dataset_name: str) -> str:
    """The PPA style of a registered split: its metadata's ``phrase_style`` ("flickr" or
    "referit"; "flickr" when unset)."""
    from detectron2.data import MetadataCatalog

    return MetadataCatalog.get(dataset_name).get("phrase_style", "flickr")


class WordNetUnavailable(RuntimeError):
    """nltk's WordNet data is not installed."""


class WordNetLexicon:
    """Synonyms and hypernyms of a word from WordNet.

    Args:
        wordnet: an nltk ``WordNetCorpusReader``; default nltk's ``wordnet`` corpus, loaded now
            (raises :class:`WordNetUnavailable` with install instructions when it is missing).
        config_key: the boolean config key that asked for PPA, named in that error
            (``TEST.PHRASE_DETECTION.PPA`` for PPA-augmented evaluation).
    """

    def __init__(self, wordnet=None, config_key="INPUT.PHRASES.PPA"):
        if wordnet is None:
            from nltk.corpus import wordnet

            try:
                wordnet.ensure_loaded()
            except LookupError as e:
                import nltk

                raise WordNetUnavailable(
                    f"Positive phrase augmentation ({config_key} True) needs nltk's WordNet data, "
                    f"which is not installed (searched {list(nltk.data.path)}). Install it with "
                    "`python -m nltk.downloader wordnet`, or offline from Debian's WordNet with "
                    "`apt-get install wordnet-base wordnet-sense-index && python tools/setup/install_wordnet.py`, "
                    f"or set {config_key} False."
                ) from e
        self._wn = wordnet
        self._cache = {}

    def alternatives(self, word):
        """Sorted synonyms and hypernyms of ``word`` (lowercase, spaces for underscores), minus the word."""
        if word not in self._cache:
            names = set()
            for synset in self._wn.synsets(word):
                related = [synset] if word in _NO_HYPERNYMS else [synset] + synset.hypernyms()
                for s in related:
                    names.update(n.lower().replace("_", " ") for n in s.lemma_names())
            names.discard(word)
            self._cache[word] = sorted(names - _EXCLUDED.get(word, set()))
        return self._cache[word]


class PositivePhraseAugmenter:
    """Phrases of the split that also describe a ground-truth box of ``phrase``.

    Args:
        known_phrases: the normalized phrases of the split (candidates must be among them).
        lexicon: anything with ``alternatives(word) -> list[str]``; default :class:`WordNetLexicon`.
        style: ``"flickr"`` (word replacement and sub-phrases) or ``"referit"`` (replacement only,
            spatial words fixed).
    """

    def __init__(self, known_phrases, lexicon=None, style="flickr"):
        if style not in ("flickr", "referit"):
            raise ValueError(f"PPA style must be 'flickr' or 'referit', got {style!r}")
        self.known = frozenset(known_phrases)
        self.lexicon = lexicon if lexicon is not None else WordNetLexicon()
        self.style = style
        self._cache = {}

    def _replacements(self, words):
        for i, word in enumerate(words):
            if self.style == "referit" and word in _FIXED_REFERIT_WORDS:
                continue
            for alt in self.lexicon.alternatives(word):
                yield " ".join(words[:i] + [alt] + words[i + 1:])

    @staticmethod
    def _subphrases(words):
        if len(words) > MAX_SUBPHRASE_TOKENS:
            return
        for k in range(1, len(words)):
            for combo in itertools.combinations(words, k):
                yield " ".join(combo)

    def __call__(self, phrase):
        """Sorted augmented phrases of a normalized ``phrase`` (never the phrase itself)."""
        if phrase not in self._cache:
            words = phrase.split()
            candidates = set(self._replacements(words))
            if self.style == "flickr":
                candidates.update(self._subphrases(words))
            candidates.discard(phrase)
            self._cache[phrase] = sorted(candidates & self.known)
        return self._cache[phrase]
