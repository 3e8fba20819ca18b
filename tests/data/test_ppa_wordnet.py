"""PPA with real WordNet (built from Debian's WordNet database when it is installed) and without."""
import nltk
import pytest

from phrasedet.data import PositivePhraseAugmenter, WordNetLexicon, WordNetUnavailable
from phrasedet.text.wordnet import install_wordnet


def test_real_wordnet_synonyms_hypernyms_and_exclusions(wordnet_reader):
    lex = WordNetLexicon(wordnet_reader)
    jacket = lex.alternatives("jacket")
    assert {"coat", "garment", "apparel"} <= set(jacket)  # synonym / hypernyms
    assert "cap" not in jacket and "jacket" not in jacket  # the released code's manual exclusion
    # 'white' takes no hypernyms: only lemmas of its own synsets
    own = {n.lower().replace("_", " ") for s in wordnet_reader.synsets("white") for n in s.lemma_names()}
    assert set(lex.alternatives("white")) == own - {"white"}
    ppa = PositivePhraseAugmenter({"blue coat", "blue", "jacket", "blue cap", "red coat"}, lex, "flickr")
    assert ppa("blue jacket") == ["blue", "blue coat", "jacket"]


def test_missing_wordnet_says_how_to_install_it(tmp_path, monkeypatch):
    if type(nltk.corpus.wordnet).__name__ != "LazyCorpusLoader":
        pytest.skip("nltk's wordnet corpus was already loaded in this process")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(WordNetUnavailable, match=r"nltk.downloader wordnet.*tools/setup/install_wordnet.py.*INPUT.PHRASES.PPA False"):
        PositivePhraseAugmenter({"x"})


def test_install_wordnet_names_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"\['data.noun'.*wordnet-sense-index"):
        install_wordnet(str(tmp_path / "out"), str(tmp_path))
