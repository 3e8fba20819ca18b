"""PhraseVocabulary: training counts of normalized phrases and zero/few/common buckets."""
import json

import pytest

import phrasedet.text.vocab as vocab_module
from phrasedet.fileio import BadFileError
from phrasedet.text import BUCKETS, PhraseVocabulary, bucket_of_count


def _record(phrases, unboxed=()):
    return {
        "annotations": [{"phrase": p} for p in phrases],
        "unboxed_phrases": [{"phrase": p, "reason": "nobox"} for p in unboxed],
        "captions": ["a cat sits"],
        "unrelated_captions": [],
    }


@pytest.fixture
def vocab():
    # "man": 100 instances over two images, "woman": 101, "dog": 1; "cat" only unboxed / in captions.
    dicts = [
        _record(["man"] * 60 + ["woman"] * 101 + ["dog"], unboxed=["cat", "cat"]),
        _record(["man"] * 40),
        _record([]),
    ]
    return PhraseVocabulary.from_dataset_dicts(dicts)


@pytest.mark.parametrize(
    "count, bucket",
    [(0, "zero_shot"), (1, "few_shot"), (100, "few_shot"), (101, "common"), (10**6, "common")],
)
def test_bucket_of_count(count, bucket):
    assert bucket_of_count(count) == bucket


def test_bucket_of_count_custom_thresholds():
    # the errors: test_bucket_of_count_error_messages
    assert bucket_of_count(5, thresholds=(1, 5)) == "few_shot"
    assert bucket_of_count(6, thresholds=(1, 5)) == "common"


def test_counts_only_ground_truth_annotations(vocab):
    assert vocab.count("man") == 100
    assert vocab.count("woman") == 101
    assert vocab.count("dog") == 1
    assert vocab.count("cat") == 0  # unboxed phrases and captions are not instances
    assert vocab.total == 202
    assert len(vocab) == 3
    assert vocab.phrases() == ["dog", "man", "woman"]
    assert "dog" in vocab and "cat" not in vocab


def test_buckets(vocab):
    assert [vocab.bucket(p) for p in ("cat", "dog", "man", "woman")] == [
        "zero_shot", "few_shot", "few_shot", "common"]
    # distinct phrases: "man" twice counts once
    assert vocab.bucket_counts(["cat", "dog", "man", "man", "woman", "tree"]) == {
        "zero_shot": 2, "few_shot": 2, "common": 1}
    assert vocab.bucket_counts([]) == dict.fromkeys(BUCKETS, 0)


def test_frequencies(vocab):
    freqs = vocab.frequencies()
    assert list(freqs) == ["dog", "man", "woman"]
    assert freqs["dog"] == pytest.approx(1 / 202)
    assert freqs["man"] == pytest.approx(100 / 202)
    assert freqs["woman"] == pytest.approx(101 / 202)
    assert sum(freqs.values()) == pytest.approx(1.0)
    assert PhraseVocabulary().frequencies() == {}


def test_json_round_trip(vocab, tmp_path):
    path = tmp_path / "sub" / "vocab.json"
    vocab.to_json(str(path))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data == {"thresholds": [0, 100], "counts": {"dog": 1, "man": 100, "woman": 101}}
    loaded = PhraseVocabulary.from_json(str(path))
    assert loaded == vocab
    assert loaded.thresholds == (0, 100)
    assert loaded.bucket("woman") == "common"


def test_custom_thresholds_survive_round_trip(tmp_path):
    vocab = PhraseVocabulary({"a": 3, "b": 10}, thresholds=(2, 5))
    assert vocab.bucket("a") == "few_shot" and vocab.bucket("b") == "common"
    vocab.to_json(str(tmp_path / "v.json"))
    assert PhraseVocabulary.from_json(str(tmp_path / "v.json")).thresholds == (2, 5)


# ------------------------------------------------------------------ error messages and edge cases

_BUCKETS_REPR = "('zero_shot', 'few_shot', 'common')"


@pytest.mark.parametrize(
    "count, thresholds, message",
    [
        (-1, (0, 100), "instance count must be >= 0, got -1"),
        (3, (0,), f"need 2 thresholds for buckets {_BUCKETS_REPR}, got (0,)"),
        (3, (0, 5, 9), f"need 2 thresholds for buckets {_BUCKETS_REPR}, got (0, 5, 9)"),
        (3, (100, 0), "bucket thresholds must be strictly increasing, got (100, 0)"),
        # equal thresholds would leave the middle bucket empty: rejected too ("strictly")
        (3, (5, 5), "bucket thresholds must be strictly increasing, got (5, 5)"),
    ],
    ids=["negative_count", "too_few", "too_many", "decreasing", "equal"],
)
def test_bucket_of_count_error_messages(count, thresholds, message):
    with pytest.raises(ValueError) as e:
        bucket_of_count(count, thresholds=thresholds)
    assert str(e.value) == message


def test_equality_needs_the_same_counts_and_the_same_thresholds():
    base = PhraseVocabulary({"a": 1})
    assert base == PhraseVocabulary({"a": 1})
    assert base != PhraseVocabulary({"a": 1}, thresholds=(1, 5))  # same counts, other thresholds
    assert base != PhraseVocabulary({"a": 2})  # same thresholds, other counts


def test_frequencies_are_empty_when_the_total_is_zero_even_with_a_positive_count():
    # The constructor takes any integer counts (a Counter may hold negatives); a total of 0 means
    # "no instances": {} and no division by zero, although "a" has a positive count.
    vocab = PhraseVocabulary({"a": 1, "b": -1})
    assert vocab.total == 0 and vocab.phrases() == ["a"]
    assert vocab.frequencies() == {}


def test_from_dataset_dicts_passes_thresholds_and_allows_records_without_annotations():
    dicts = [{"file_name": "no_annotations_key.jpg"}, _record(["dog", "dog"])]
    vocab = PhraseVocabulary.from_dataset_dicts(dicts, thresholds=(2, 5))
    assert vocab.thresholds == (2, 5)
    assert vocab.counts == {"dog": 2}
    assert vocab.bucket("dog") == "zero_shot"  # 2 <= 2 (with the default (0, 100) it would be few_shot)


def test_to_json_writes_exact_utf8_bytes_with_one_space_indent(tmp_path):
    # The file is read by people and other tools: pin its bytes (indent 1, phrases sorted, no \\u escapes).
    path = tmp_path / "v.json"
    PhraseVocabulary({"caf\u00e9": 2, "a": 1}, thresholds=(1, 5)).to_json(str(path))
    assert path.read_bytes() == (
        b'{\n "thresholds": [\n  1,\n  5\n ],\n "counts": {\n  "a": 1,\n  "caf\xc3\xa9": 2\n }\n}'
    )


def test_to_json_writes_utf8_whatever_the_locale_encoding(tmp_path, monkeypatch, latin1_locale):
    # from_json reads UTF-8 only: the file must not follow a Latin-1 locale
    latin1_locale(vocab_module)
    path = tmp_path / "v.json"
    PhraseVocabulary({"caf\u00e9": 2}).to_json(str(path))
    assert "caf\u00e9".encode("utf-8") in path.read_bytes()
    monkeypatch.undo()
    assert PhraseVocabulary.from_json(str(path)).count("caf\u00e9") == 2


def test_from_json_of_a_missing_file_names_it_as_a_phrase_vocabulary_file(tmp_path):
    path = str(tmp_path / "missing.json")
    with pytest.raises(FileNotFoundError) as e:
        PhraseVocabulary.from_json(path)
    assert str(e.value) == f"phrase vocabulary file {path!r} does not exist"


def test_from_json_names_non_integer_thresholds(tmp_path):
    path = tmp_path / "v.json"
    path.write_text('{"thresholds": [0.5, 100], "counts": {}}', encoding="utf-8")
    with pytest.raises(BadFileError) as e:
        PhraseVocabulary.from_json(str(path))
    assert str(e.value) == f"{path}: key 'thresholds': thresholds must be integers, got [0.5, 100]"
