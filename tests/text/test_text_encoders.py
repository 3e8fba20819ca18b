"""Phrase encoders (mean pooling, Fisher vectors) and the cached EncodedVocabulary."""
import logging
import math

import numpy as np
import pytest
from gensim.models import KeyedVectors

from phrasedet.text import (
    PHRASE_ENCODER_REGISTRY,
    EncodedVocabulary,
    FisherVectorEncoder,
    MeanPoolEncoder,
    build_phrase_encoder,
)


def _kv(words, vectors):
    kv = KeyedVectors(len(vectors[0]), count=0, dtype=np.float32)
    kv.add_vectors(list(words), np.asarray(vectors, dtype=np.float32))
    return kv


@pytest.fixture
def tiny_kv():
    # a = (1, 0), b = (0, 2), c = (3, 4)
    return _kv(["a", "b", "c"], [[1, 0], [0, 2], [3, 4]])


@pytest.fixture
def cloud_kv():
    rng = np.random.default_rng(0)
    centers = np.array([[0, 0, 0], [6, 0, 0], [0, 6, 0]], dtype=np.float64)
    points = np.concatenate([c + rng.normal(size=(40, 3)) for c in centers])
    return _kv([f"w{i}" for i in range(len(points))], points)


# ---- mean pooling -------------------------------------------------------------------------

def test_mean_pool_hand_computed(tiny_kv):
    enc = MeanPoolEncoder(tiny_kv)
    out = enc.encode(["a b", "a c", "c", "b b a"])
    assert out.shape == (4, 2) and out.dtype == np.float32 and enc.dim == 2
    s5 = math.sqrt(5)
    np.testing.assert_allclose(out[0], [1 / s5, 2 / s5], rtol=1e-6)  # mean (0.5, 1)
    np.testing.assert_allclose(out[1], [1 / math.sqrt(2)] * 2, rtol=1e-6)  # mean (2, 2)
    np.testing.assert_allclose(out[2], [0.6, 0.8], rtol=1e-6)  # (3, 4) / 5
    np.testing.assert_allclose(out[3], [1 / math.sqrt(17), 4 / math.sqrt(17)], rtol=1e-6)  # (1/3, 4/3)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)


def test_mean_pool_oov_dropped_and_counted(tiny_kv, caplog):
    enc = MeanPoolEncoder(tiny_kv)
    with caplog.at_level(logging.WARNING, logger="phrasedet.text"):
        out = enc.encode(["a zebra c", "zebra yak", "c", "zebra"])
    np.testing.assert_allclose(out[0], [1 / math.sqrt(2)] * 2, rtol=1e-6)  # same as "a c"
    np.testing.assert_array_equal(out[1], [0, 0])  # no known word -> zeros
    np.testing.assert_array_equal(out[3], [0, 0])
    assert enc.oov.n_phrases == 4
    assert enc.oov.n_tokens == 7
    assert enc.oov.n_oov_tokens == 4
    assert enc.oov.n_empty_phrases == 2
    assert enc.oov.oov_words == {"zebra": 3, "yak": 1}
    assert enc.oov.most_common(1) == [("zebra", 3)]
    assert enc.oov.oov_rate == pytest.approx(4 / 7)
    assert "2 of 4 phrases have no word" in caplog.text and "zebra yak" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="phrasedet.text"):
        enc.encode(["yak"])  # counted, but warned only once per encoder
    assert enc.oov.n_empty_phrases == 3 and caplog.text == ""
    enc.oov.reset()
    assert enc.oov.n_tokens == 0 and not enc.oov.oov_words


def test_mean_pool_max_tokens_keeps_last_tokens(tiny_kv):
    enc = MeanPoolEncoder(tiny_kv, max_tokens=1)
    np.testing.assert_allclose(enc.encode(["a c"])[0], [0.6, 0.8], rtol=1e-6)  # only "c"
    enc2 = MeanPoolEncoder(tiny_kv, max_tokens=2)
    np.testing.assert_allclose(enc2.encode(["c a zebra"])[0], [1, 0], rtol=1e-6)  # "a zebra"
    assert enc2.oov.n_tokens == 2 and enc2.oov.n_oov_tokens == 1
    assert enc2.tokens("c a zebra") == ["a", "zebra"]
    with pytest.raises(ValueError):
        MeanPoolEncoder(tiny_kv, max_tokens=0)


def test_encode_edge_cases(tiny_kv):
    enc = MeanPoolEncoder(tiny_kv)
    assert enc.encode([]).shape == (0, 2)
    with pytest.raises(TypeError):
        enc.encode("a b")


def test_encode_batches_give_same_result(tiny_kv):
    phrases = ["a b", "zebra", "c", "b c a", "a"] * 3
    whole = MeanPoolEncoder(tiny_kv).encode(phrases)
    small = MeanPoolEncoder(tiny_kv)
    small.batch_size = 2
    np.testing.assert_array_equal(small.encode(phrases), whole)


def test_fingerprint_changes_with_params_and_vectors(tiny_kv):
    fp = MeanPoolEncoder(tiny_kv).fingerprint()
    assert fp == MeanPoolEncoder(tiny_kv).fingerprint()
    assert fp != MeanPoolEncoder(tiny_kv, max_tokens=10).fingerprint()
    assert fp != MeanPoolEncoder(_kv(["a", "b", "c"], [[1, 0], [0, 2], [3, 5]])).fingerprint()
    assert fp != FisherVectorEncoder(tiny_kv, n_components=1).fingerprint()


def test_registry(tiny_kv):
    assert PHRASE_ENCODER_REGISTRY.get("mean") is MeanPoolEncoder
    assert PHRASE_ENCODER_REGISTRY.get("fisher") is FisherVectorEncoder
    enc = build_phrase_encoder("fisher", tiny_kv, n_components=1)
    assert isinstance(enc, FisherVectorEncoder) and enc.dim == 4


# ---- Fisher vectors -----------------------------------------------------------------------

def _reference_fisher_vector(words, weights, means, variances):
    """Direct per-word implementation of the improved Fisher vector (posteriors from the densities)."""
    k, d = means.shape
    g_mu, g_sigma = np.zeros((k, d)), np.zeros((k, d))
    for x in words:
        log_p = np.array([
            math.log(weights[j]) - 0.5 * np.sum(np.log(2 * np.pi * variances[j])
                                                + (x - means[j]) ** 2 / variances[j])
            for j in range(k)])
        gamma = np.exp(log_p - log_p.max())
        gamma /= gamma.sum()
        for j in range(k):
            u = (x - means[j]) / np.sqrt(variances[j])
            g_mu[j] += gamma[j] * u / math.sqrt(weights[j])
            g_sigma[j] += gamma[j] * (u ** 2 - 1) / math.sqrt(2 * weights[j])
    fv = np.concatenate([g_mu.ravel(), g_sigma.ravel()]) / len(words)
    fv = np.sign(fv) * np.sqrt(np.abs(fv))
    return fv / np.linalg.norm(fv)


def test_fisher_vector_k1_matches_hand_formula():
    # K = 1: the GMM is the sample mean and (biased) variance (+ sklearn's reg_covar = 1e-6),
    # every posterior is 1.
    points = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, -1.0], [-2.0, 1.0]])
    kv = _kv(["p", "q", "r", "s"], points)
    enc = FisherVectorEncoder(kv, n_components=1).fit()
    mu = np.array([1.0, 1.0])
    var = np.array([5.0, 2.0]) + 1e-6
    np.testing.assert_allclose(enc.gmm.means_[0], mu, atol=1e-9)
    np.testing.assert_allclose(enc.gmm.covariances_[0], var, rtol=1e-6)
    # phrase "p q": u = (x - mu) / sigma for x = (0, 1), (2, 3)
    sigma = np.sqrt(var)
    u = (points[:2] - mu) / sigma
    g_mu = u.mean(axis=0)
    g_sigma = (u ** 2 - 1).mean(axis=0) / math.sqrt(2)
    fv = np.concatenate([g_mu, g_sigma])
    fv = np.sign(fv) * np.sqrt(np.abs(fv))
    expected = fv / np.linalg.norm(fv)
    out = enc.encode(["p q"])[0]
    assert out.shape == (4,)
    np.testing.assert_allclose(out, expected, atol=1e-6)
    # by hand: u_p = (-1/sqrt5, 0), u_q = (1/sqrt5, 2/sqrt2) -> g_mu = (0, 1/sqrt2),
    # g_sigma = ((1/5 - 1) / sqrt2, ((0 - 1) + (2 - 1)) / 2 / sqrt2) = (-0.8/sqrt2, 0).
    # reg_covar leaves g_sigma[1] ~ -5e-7, which the signed square root turns into ~ -5e-4.
    hand = np.array([0.0, math.sqrt(1 / math.sqrt(2)), -math.sqrt(0.8 / math.sqrt(2)), 0.0])
    np.testing.assert_allclose(out, hand / np.linalg.norm(hand), atol=1e-3)


def test_fisher_vector_matches_reference_implementation(cloud_kv):
    enc = FisherVectorEncoder(cloud_kv, n_components=3, seed=0)
    phrases = ["w0 w50", "w90", "w3 w41 w100 w7", "zebra w10"]
    out = enc.encode(phrases)
    assert out.shape == (4, 2 * 3 * 3) and enc.dim == 18
    gmm = enc.gmm
    for phrase, row in zip(phrases, out):
        words = [cloud_kv[w].astype(np.float64) for w in phrase.split() if w in cloud_kv.key_to_index]
        ref = _reference_fisher_vector(words, gmm.weights_, gmm.means_, gmm.covariances_)
        np.testing.assert_allclose(row, ref, atol=2e-5)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    assert enc.oov.oov_words == {"zebra": 1}


def test_fisher_vector_deterministic_and_subsampled_fit(cloud_kv):
    phrases = ["w0 w50", "w90 w91", "w5"]
    a = FisherVectorEncoder(cloud_kv, n_components=2, seed=3, max_fit_words=60)
    b = FisherVectorEncoder(cloud_kv, n_components=2, seed=3, max_fit_words=60)
    out_a, out_b = a.encode(phrases), b.encode(phrases)  # fitted lazily on 60 of the 120 words
    np.testing.assert_array_equal(a.gmm.means_, b.gmm.means_)
    np.testing.assert_array_equal(out_a, out_b)
    assert a.fingerprint() == b.fingerprint()
    assert len(a._default_fit_rows()) == 60


def test_fisher_vector_fit_on_word_list(cloud_kv):
    words = [f"w{i}" for i in range(40)] + ["zebra"]  # one cluster; OOV fit words ignored
    enc = FisherVectorEncoder(cloud_kv, n_components=1).fit(words)
    first_cluster = cloud_kv.vectors[:40].astype(np.float64)
    np.testing.assert_allclose(enc.gmm.means_[0], first_cluster.mean(axis=0), atol=1e-6)
    assert enc.fingerprint() != FisherVectorEncoder(cloud_kv, n_components=1).fingerprint()
    out = enc.encode(["zebra", "w1"])
    np.testing.assert_array_equal(out[0], np.zeros(6))
    assert np.linalg.norm(out[1]) == pytest.approx(1.0, rel=1e-5)


# ---- EncodedVocabulary --------------------------------------------------------------------

class CountingEncoder:
    """Wraps an encoder and records every encode() call."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = []

    @property
    def dim(self):
        return self.inner.dim

    def fingerprint(self):
        return self.inner.fingerprint()

    def encode(self, phrases):
        self.calls.append(list(phrases))
        return self.inner.encode(phrases)


def test_encoded_vocabulary_encodes_once(tiny_kv):
    enc = CountingEncoder(MeanPoolEncoder(tiny_kv))
    vocab = EncodedVocabulary(enc, ["a c", "a", "a c", "zebra"])
    assert enc.calls == [["a c", "a", "zebra"]]
    assert vocab.phrases == ["a c", "a", "zebra"] and len(vocab) == 3
    assert vocab.matrix.shape == (3, 2)
    assert vocab.index("a") == 1 and "a" in vocab and "b" not in vocab
    with pytest.raises(KeyError):
        vocab.index("b")

    out = vocab.lookup(["c", "a", "a c", "c"])  # "c" encoded once, on the fly
    assert enc.calls[1:] == [["c"]]
    np.testing.assert_allclose(out, [[0.6, 0.8], [1, 0], [0.5 ** 0.5] * 2, [0.6, 0.8]], rtol=1e-6)
    np.testing.assert_allclose(vocab["a c"], [0.5 ** 0.5] * 2, rtol=1e-6)
    assert vocab.add(["a", "c"]) == 0 and len(enc.calls) == 2
    assert vocab.add(["b", "b"]) == 1 and enc.calls[-1] == ["b"]
    np.testing.assert_array_equal(vocab.matrix[vocab.index("zebra")], [0, 0])
    assert vocab.matrix.shape == (5, 2)
    with pytest.raises(ValueError):
        vocab.matrix[0, 0] = 1.0  # read-only view


def test_encoded_vocabulary_grows_past_buffer(tiny_kv):
    vocab = EncodedVocabulary(MeanPoolEncoder(tiny_kv))
    phrases = ["a", "b", "c", "a b", "b c", "a c", "a b c"]
    for p in phrases:
        vocab[p]
    np.testing.assert_array_equal(vocab.matrix, MeanPoolEncoder(tiny_kv).encode(phrases))


def test_encoded_vocabulary_cache_round_trip(tiny_kv, tmp_path):
    cache = str(tmp_path / "enc")
    phrases = ["a b", "c", "zebra", "b c"]
    first_enc = CountingEncoder(MeanPoolEncoder(tiny_kv))
    first = EncodedVocabulary(first_enc, phrases, cache_dir=cache)
    assert len(first_enc.calls) == 1
    path = first.cache_path()
    assert path.startswith(cache) and path.endswith(".npz")

    second_enc = CountingEncoder(MeanPoolEncoder(tiny_kv))
    second = EncodedVocabulary(second_enc, phrases, cache_dir=cache)
    assert second_enc.calls == []  # loaded, not encoded
    assert second.phrases == phrases
    np.testing.assert_array_equal(second.matrix, first.matrix)
    assert second.matrix.dtype == np.float32

    other_enc = CountingEncoder(MeanPoolEncoder(tiny_kv, max_tokens=1))  # another fingerprint
    EncodedVocabulary(other_enc, phrases, cache_dir=cache)
    assert len(other_enc.calls) == 1
    more_enc = CountingEncoder(MeanPoolEncoder(tiny_kv))  # another phrase list
    EncodedVocabulary(more_enc, phrases + ["a"], cache_dir=cache)
    assert len(more_enc.calls) == 1

    # save() after add() writes the grown list under its own key
    second.add(["a"])
    assert second.save() == second.cache_path()
    third_enc = CountingEncoder(MeanPoolEncoder(tiny_kv))
    third = EncodedVocabulary(third_enc, phrases + ["a"], cache_dir=cache)
    assert third_enc.calls == [] and third.phrases == phrases + ["a"]


def test_encoded_vocabulary_fisher_cache_skips_gmm_fit(cloud_kv, tmp_path):
    phrases = ["w0 w50", "w90", "w3 w41"]
    first = EncodedVocabulary(FisherVectorEncoder(cloud_kv, n_components=2), phrases, cache_dir=str(tmp_path))
    enc = FisherVectorEncoder(cloud_kv, n_components=2)
    second = EncodedVocabulary(enc, phrases, cache_dir=str(tmp_path))
    assert enc.gmm is None  # fingerprint is defined by the fit parameters, not the fitted GMM
    np.testing.assert_array_equal(second.matrix, first.matrix)
