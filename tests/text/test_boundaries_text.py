"""Boundary tests of the text pipeline (issue 14): Unicode punctuation and whitespace in phrase and
caption normalization, the stop-word rule's edge, the word-vocabulary ``min_count`` and the phrase
vocabulary's positive-count rule, and the phrase-token limit ``PHRASEDET.TEXT.MAX_TOKENS``.

Documented behaviour (phrasedet/text/normalize.py, docs/DECISIONS.md "Phrase normalization",
docs/RETRIEVAL.md "caption_words: lowercased Treebank tokens without punctuation"): lowercase,
Treebank-tokenize, strip punctuation (ASCII punctuation and the typographic quotes “ ” ‘ ’ and the
accents ` ´), drop stop words unless that empties the phrase, ``unk`` when nothing is left.
Zero/few/common bucket boundaries are tested in tests/evaluation/test_boundaries_phrase_detection.py.
"""
import json

import numpy as np
import pytest
from detectron2.config import get_cfg
from gensim.models import KeyedVectors

from phrasedet.config import add_phrasedet_config
from phrasedet.text import PAD, UNK, UNKNOWN, PhraseVocabulary, WordVocabulary, caption_words, normalize_phrase
from phrasedet.text.build import build_text_encoder

# ------------------------------------------------------------------ typographic punctuation


@pytest.mark.parametrize(
    "typographic, ascii_form, phrase, words",
    [
        # U+201C LEFT DOUBLE QUOTATION MARK: its own token, stripped to "" and dropped.
        ("\u201cred ball", '"red ball', "red ball", ["red", "ball"]),
        # U+201D RIGHT DOUBLE QUOTATION MARK.
        ("red ball\u201d", 'red ball"', "red ball", ["red", "ball"]),
        # U+2018 LEFT SINGLE QUOTATION MARK.
        ("\u2018red ball", "'red ball", "red ball", ["red", "ball"]),
        # U+2019 RIGHT SINGLE QUOTATION MARK as a closing quote.
        ("red ball\u2019", "red ball'", "red ball", ["red", "ball"]),
        # U+2019 as an apostrophe: tokens the, man, ’, s, ball -> ’ stripped, "s" and "the" are stop
        # words -> "man ball"; ASCII "man's" gives the, man, 's, ball -> the same. caption_words keeps
        # the stop words: the, man, s, ball.
        ("the man\u2019s ball", "the man's ball", "man ball", ["the", "man", "s", "ball"]),
        # U+00B4 ACUTE ACCENT glued to the word ("red´" is one token): stripped inside the token.
        ("red\u00b4 ball", "red' ball", "red ball", ["red", "ball"]),
    ],
)
def test_typographic_quote_and_apostrophe_are_stripped_like_their_ascii_forms(typographic, ascii_form, phrase, words):
    assert normalize_phrase(typographic) == phrase
    assert normalize_phrase(ascii_form) == phrase
    assert caption_words(typographic) == words == caption_words(ascii_form)


def test_a_phrase_of_typographic_punctuation_only_is_unk_and_a_caption_of_it_has_no_word():
    # “ ’ ” ´: every token strips to "" -> nothing left -> UNK (phrase), [] (caption words).
    for raw in ("\u201c \u2019 \u201d", "\u00b4", "\u2018\u2019"):
        assert normalize_phrase(raw) == UNK
        assert caption_words(raw) == []


@pytest.mark.parametrize(
    "raw, phrase",
    [
        ("the red one", "red"),  # exactly one content word: the stop words "the", "one" go
        ("the one", "the one"),  # zero content words: all kept (the documented exception)
        ("the one \u2019", "the one"),  # a punctuation token is no content word: still all kept
        ("the \u2019s one", "the s one"),  # ’ stripped; "the", "s", "one" all stop words: kept
        ("The Dog\u2019s ball", "dog ball"),  # as "A Dog's ball" -> "dog ball"
    ],
)
def test_stop_words_are_dropped_only_while_a_content_word_remains(raw, phrase):
    assert normalize_phrase(raw) == phrase


def test_punctuation_inside_a_token_is_removed_joining_its_parts():
    # Treebank keeps "red-blue" and "t-shirt" whole; stripping '-' joins them.
    assert normalize_phrase("red-blue ball") == "redblue ball"
    assert normalize_phrase("A T-shirt") == "tshirt"
    assert caption_words("A T-shirt") == ["a", "tshirt"]


@pytest.mark.parametrize(
    "space",
    ["\u00a0", "\u2009", "\u202f", "\u3000", "\t"],
    ids=["nbsp", "thin_space", "narrow_nbsp", "ideographic_space", "tab"],
)
def test_unicode_spaces_separate_words_like_a_space(space):
    raw = f"A{space}red{space}ball"
    assert normalize_phrase(raw) == normalize_phrase("A red ball") == "red ball"
    assert caption_words(raw) == ["a", "red", "ball"]


def test_accented_and_full_width_letters_are_lowercased_but_not_folded():
    # The normalized string is the category: letters are kept as written, only lowercased
    # (no accent stripping, no NFKC folding of full-width forms; the docs name no such step).
    assert normalize_phrase("CAF\u00c9 Cr\u00e8me") == "caf\u00e9 cr\u00e8me"
    assert normalize_phrase("caf\u00e9") != normalize_phrase("cafe")
    assert caption_words("Na\u00efve r\u00e9sum\u00e9") == ["na\u00efve", "r\u00e9sum\u00e9"]
    assert normalize_phrase("\uff32\uff25\uff24 \uff42\uff41\uff4c\uff4c") == "\uff52\uff45\uff44 \uff42\uff41\uff4c\uff4c"


# Every Unicode punctuation character (categories P*) is stripped, not only ASCII's and the quotes.
@pytest.mark.parametrize(
    "raw, phrase, words",
    [
        ("red \u2013 blue ball", "red blue ball", ["red", "blue", "ball"]),  # EN DASH, its own token
        ("red \u2014 blue ball", "red blue ball", ["red", "blue", "ball"]),  # EM DASH
        ("\u2014", UNK, []),  # a phrase of one em dash is empty, like "..."
        ("a dog\u2026", "dog", ["a", "dog"]),  # HORIZONTAL ELLIPSIS glued to the word
        ("\u00abdog\u00bb", "dog", ["dog"]),  # guillemets
    ],
    ids=["en_dash", "em_dash", "em_dash_alone", "ellipsis", "guillemets"],
)
def test_unicode_dashes_ellipsis_and_guillemets_are_stripped_as_punctuation(raw, phrase, words):
    assert normalize_phrase(raw) == phrase
    assert caption_words(raw) == words


@pytest.mark.parametrize("apostrophe", ["\u2019", "\u02bc"])  # RIGHT SINGLE QUOTATION MARK, MODIFIER LETTER APOSTROPHE
def test_a_typographic_apostrophe_splits_a_contraction_like_the_ascii_one(apostrophe):
    # "don't" -> Treebank tokens do, n't -> "do", "nt" ("do" is a stop word, so the phrase is "nt");
    # with the apostrophe left as it is the tokenizer would see one word and give "don", "t".
    assert caption_words(f"don{apostrophe}t") == caption_words("don't") == ["do", "nt"]
    assert normalize_phrase(f"I don{apostrophe}t know") == normalize_phrase("I don't know") == "nt know"


# ------------------------------------------------------------------ word vocabulary min_count


def test_gru_word_vocabulary_keeps_words_seen_exactly_min_word_count_times():
    cfg = add_phrasedet_config(get_cfg())
    assert cfg.MODEL.RETRIEVAL.GRU.MIN_WORD_COUNT == 4  # VSE++: words seen >= 4 times
    captions = ["A dog .", "Dog and cat", "the DOG\u2019s cat", "dog, cat, man", "dog cat man man"]
    # occurrences (case folded, "DOG’s" -> dog + s, repeats within a caption counted):
    # dog 1+1+1+1+1 = 5, cat 0+1+1+1+1 = 4 (on the boundary), man 1+2 = 3 (one below), others 1.
    vocab = WordVocabulary.from_captions(captions, min_count=4)
    assert vocab.words == [PAD, UNKNOWN, "dog", "cat"]  # most frequent first
    assert vocab.encode("The dog\u2019s man") == [1, 2, 1, 1]  # the, dog, s, man -> only dog known
    assert [w for w in ("dog", "cat", "man") if w in WordVocabulary.from_captions(captions, min_count=5)] == ["dog"]
    assert WordVocabulary.from_captions(captions, min_count=3).words[2:] == ["dog", "cat", "man"]


def test_word_vocabulary_min_count_1_is_valid_and_keeps_a_word_seen_once():
    # default min_count 1 (TEXT_CNN.MIN_WORD_COUNT); 0 is rejected (tested in test_text_word_vocab.py)
    assert WordVocabulary.from_captions(["zebra"]).words == [PAD, UNKNOWN, "zebra"]
    assert WordVocabulary.from_captions(["zebra"], min_count=1).words == [PAD, UNKNOWN, "zebra"]
    assert WordVocabulary.from_captions(["zebra"], min_count=2).words == [PAD, UNKNOWN]


# ------------------------------------------------------------------ phrase vocabulary: count > 0


def test_a_phrase_with_count_zero_is_not_in_the_vocabulary_and_one_is(tmp_path):
    vocab = PhraseVocabulary({"dog": 0, "cat": 1})
    assert "dog" not in vocab and "cat" in vocab
    assert len(vocab) == 1 and vocab.phrases() == ["cat"] and vocab.total == 1
    assert vocab == PhraseVocabulary({"cat": 1})  # a zero count is no entry
    path = tmp_path / "v.json"
    vocab.to_json(str(path))
    assert json.loads(path.read_text(encoding="utf-8"))["counts"] == {"cat": 1}
    # a count of exactly 0 is a valid file (the error starts at -1, test_fuzz_vocab_files.py)
    path.write_text(json.dumps({"thresholds": [0, 100], "counts": {"dog": 0, "cat": 1}}), encoding="utf-8")
    loaded = PhraseVocabulary.from_json(str(path))
    assert loaded.count("dog") == 0 and "dog" not in loaded and loaded.phrases() == ["cat"]


def test_phrase_vocabulary_json_keeps_typographic_phrases_verbatim(tmp_path):
    # to_json writes UTF-8 without \\u escapes; from_json reads the same phrase back.
    vocab = PhraseVocabulary({"caf\u00e9 \u2013 bar": 2})
    path = tmp_path / "v.json"
    vocab.to_json(str(path))
    assert "caf\u00e9 \u2013 bar" in path.read_text(encoding="utf-8")
    assert PhraseVocabulary.from_json(str(path)).count("caf\u00e9 \u2013 bar") == 2


# ------------------------------------------------------------------ MAX_TOKENS


@pytest.fixture
def tiny_kv():
    kv = KeyedVectors(2, count=0, dtype=np.float32)
    kv.add_vectors(["a", "b"], np.array([[1, 0], [0, 1]], dtype=np.float32))
    return kv


def _cfg(*opts):
    cfg = add_phrasedet_config(get_cfg())
    cfg.merge_from_list(list(opts))
    return cfg


def test_default_max_tokens_is_10_and_a_phrase_of_exactly_10_tokens_is_kept_whole(tiny_kv):
    enc = build_text_encoder(_cfg(), kv=tiny_kv)
    assert enc.max_tokens == 10  # paper 003's CITE code keeps the last 10 tokens
    ten = " ".join(f"w{i}" for i in range(10))
    eleven = " ".join(f"w{i}" for i in range(11))
    nine = " ".join(f"w{i}" for i in range(9))
    assert enc.tokens(ten) == ten.split()  # on the limit: all 10
    assert enc.tokens(eleven) == [f"w{i}" for i in range(1, 11)]  # one over: the first is dropped
    assert enc.tokens(nine) == nine.split()  # one under: all 9


def test_max_tokens_0_means_no_limit_and_whole_text_ignores_it(tiny_kv):
    eleven = " ".join(f"w{i}" for i in range(11))
    no_limit = build_text_encoder(_cfg("PHRASEDET.TEXT.MAX_TOKENS", 0), kv=tiny_kv)
    assert no_limit.max_tokens is None and len(no_limit.tokens(eleven)) == 11
    one = build_text_encoder(_cfg("PHRASEDET.TEXT.MAX_TOKENS", 1), kv=tiny_kv)
    assert one.max_tokens == 1 and one.tokens("a b") == ["b"]
    whole = build_text_encoder(_cfg("PHRASEDET.TEXT.MAX_TOKENS", 1), kv=tiny_kv, whole_text=True)
    assert whole.max_tokens is None and whole.tokens("a b") == ["a", "b"]


def test_text_is_lowercased_before_tokenizing_not_uppercased():
    # "ß".upper() is "SS", so an upper-then-lower pipeline would give "strasse"; "ﬁ" (U+FB01) likewise "fi".
    assert normalize_phrase("Straße") == "straße"
    assert caption_words("the \ufb01sh Straße") == ["the", "\ufb01sh", "straße"]


def test_normalize_phrase_uses_the_stop_words_it_is_given():
    # shipped list: "the" is a stop word, "red" is not; a custom list {"red"} keeps "the" and drops "red"
    assert normalize_phrase("the red ball") == "red ball"
    assert normalize_phrase("the red ball", stopwords=frozenset({"red"})) == "the ball"
