"""PhraseVocabulary: training counts of normalized phrases and zero/few/common buckets."""
import json

import pytest

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


def test_bucket_of_count_custom_thresholds_and_errors():
    assert bucket_of_count(5, thresholds=(1, 5)) == "few_shot"
    assert bucket_of_count(6, thresholds=(1, 5)) == "common"
    with pytest.raises(ValueError):
        bucket_of_count(-1)
    with pytest.raises(ValueError):
        bucket_of_count(3, thresholds=(0,))
    with pytest.raises(ValueError):
        bucket_of_count(3, thresholds=(100, 0))


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
