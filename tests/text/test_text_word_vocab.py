import pytest

from phrasedet.text import PAD, UNKNOWN, WordVocabulary, caption_words, caption_sentences


def test_caption_words_keep_stop_words_and_drop_punctuation():
    assert caption_words("A red circle , on the LEFT .") == ["a", "red", "circle", "on", "the", "left"]
    assert caption_words(" ... ") == []
    assert caption_words("The man’s hat") == ["the", "man", "s", "hat"]


def test_caption_sentences_use_caption_words_and_skip_unrelated_and_empty():
    records = [{"captions": ["A dog .", "...", "Unrelated text ."], "unrelated_captions": [2]}, {"captions": ["Two cats"]}]
    assert caption_sentences(records) == [["a", "dog"], ["two", "cats"]]


def test_vocabulary_order_min_count_and_encoding():
    captions = ["a red circle", "a blue circle", "a red square", "the cat"]
    vocab = WordVocabulary.from_captions(captions, min_count=2)
    # counts: a 3, circle 2, red 2, blue 1, square 1, the 1, cat 1 -> kept: a, then circle/red alphabetically
    assert vocab.words == [PAD, UNKNOWN, "a", "circle", "red"]
    assert vocab.encode("A red square!") == [2, 4, 1]
    assert vocab.encode("...") == []
    assert "red" in vocab and "blue" not in vocab and len(vocab) == 5


def test_fingerprint_identifies_the_word_list():
    a = WordVocabulary(["x", "y"])
    assert a.fingerprint() == WordVocabulary(["x", "y"]).fingerprint()
    assert a.fingerprint() != WordVocabulary(["y", "x"]).fingerprint()


def test_fingerprint_is_16_hex_digits_of_the_sha256_of_the_utf8_json_word_list():
    # printf '%s' '["<pad>", "<unk>", "café"]' | sha256sum -> fe2cda17ac2a159ec814e5d2ab9c6e9d...
    # ("café" as UTF-8, not "caf\u00e9": that JSON would hash to ef0448166c2514f4...)
    assert WordVocabulary(["caf\u00e9"]).fingerprint() == "fe2cda17ac2a159e"


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: WordVocabulary.from_captions(["a"], min_count=0), "min_count must be >= 1, got 0"),
        (lambda: WordVocabulary(["x", "x"]), "WordVocabulary: duplicate words"),
    ],
    ids=["min_count_0", "duplicate"],
)
def test_word_vocabulary_error_messages(build, message):
    with pytest.raises(ValueError) as e:
        build()
    assert str(e.value) == message
