"""Phrase encoders: fixed-length vectors of normalized phrases from word vectors.

* :class:`MeanPoolEncoder`: mean of the phrase's known word vectors, L2-normalized (paper 003's
  released code).
* :class:`FisherVectorEncoder`: improved Fisher vector of the word vectors under a diagonal GMM
  (papers 000/003 use HGLMM Fisher vectors over word2vec; this is the plain-GMM variant).
* :class:`EncodedVocabulary`: encodes each phrase once and serves rows by phrase, optionally
  cached on disk across runs.

OOV policy: a token missing from the word vectors is dropped and counted in ``encoder.oov``; a
phrase with no known token encodes to the all-zero vector (counted; logged once per encoder).
"""
import hashlib
import json
import logging
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

import numpy as np
import sklearn
from fvcore.common.registry import Registry
from gensim.models import KeyedVectors
from sklearn.mixture import GaussianMixture

from phrasedet.fileio import BadFileError, load_array_file, npz_array

from .word_vectors import keyed_vectors_fingerprint

__all__ = [
    "OOVStats",
    "PhraseEncoder",
    "MeanPoolEncoder",
    "FisherVectorEncoder",
    "PHRASE_ENCODER_REGISTRY",
    "build_phrase_encoder",
    "EncodedVocabulary",
]

logger = logging.getLogger("phrasedet.text")

PHRASE_ENCODER_REGISTRY = Registry("PHRASE_ENCODER")
PHRASE_ENCODER_REGISTRY.__doc__ = """Phrase encoders by short name ("mean", "fisher").
Each is called as ``cls(kv, **kwargs)`` with a gensim ``KeyedVectors``."""

_N_EXAMPLES = 5


def _register(name: str):
    """Register a class in ``PHRASE_ENCODER_REGISTRY`` under a short ``name`` (not its class name)."""
    def deco(cls):
        PHRASE_ENCODER_REGISTRY._do_register(name, cls)
        return cls
    return deco


def _short_hash(payload) -> str:
    """24 hex digits of the SHA-256 of ``payload`` as sorted-key JSON."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def _l2_normalize(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Rows of ``x`` [N, F] scaled to unit L2 norm; all-zero rows stay zero."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, eps)


def _segment_mean(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Mean of consecutive row segments.

    Parameters
    ----------
    values : ndarray [M, F]
        Rows of all segments, one segment after the other.
    lengths : ndarray [N] of int, all > 0, summing to M
        Segment lengths.

    Returns
    -------
    ndarray [N, F]
    """
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return np.add.reduceat(values, starts, axis=0) / lengths[:, None]


@dataclass
class OOVStats:
    """Out-of-vocabulary statistics accumulated over an encoder's ``encode`` calls.

    Attributes
    ----------
    n_phrases : int
        Phrases encoded.
    n_tokens : int
        Tokens seen (after ``max_tokens`` truncation).
    n_oov_tokens : int
        Tokens without a word vector (dropped).
    n_empty_phrases : int
        Phrases with no known token (encoded as zeros).
    oov_words : Counter
        OOV word -> occurrences.
    """

    n_phrases: int = 0
    n_tokens: int = 0
    n_oov_tokens: int = 0
    n_empty_phrases: int = 0
    oov_words: Counter = field(default_factory=Counter)

    @property
    def oov_rate(self) -> float:
        """Share of tokens without a word vector (0 when no token was seen)."""
        return self.n_oov_tokens / self.n_tokens if self.n_tokens else 0.0

    def most_common(self, n: int = 10) -> list:
        """The ``n`` most frequent OOV words as ``(word, count)`` pairs."""
        return self.oov_words.most_common(n)

    def reset(self) -> None:
        """Zero all counters."""
        self.n_phrases = self.n_tokens = self.n_oov_tokens = self.n_empty_phrases = 0
        self.oov_words.clear()


class PhraseEncoder:
    """Base class: encodes normalized phrases (``phrase.split()`` tokens) from word vectors.

    Subclasses implement :attr:`dim`, :meth:`_pool` and :meth:`_params`.

    Parameters
    ----------
    kv : KeyedVectors
        Word vectors [V, D].
    max_tokens : int or None
        Keep only the last ``max_tokens`` tokens of a phrase (before the OOV lookup); ``None``
        keeps all. Paper 003's CITE code keeps the last 10.
    """

    batch_size = 1024  # phrases pooled at once; bounds the temporary [words, K, D] arrays

    def __init__(self, kv: KeyedVectors, max_tokens: Optional[int] = None):
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be None or >= 1, got {max_tokens}")
        self.kv = kv
        self.max_tokens = max_tokens
        self.oov = OOVStats()
        self._warned_empty = False
        self._kv_fingerprint = None

    @property
    def dim(self) -> int:
        """Length of a phrase vector."""
        raise NotImplementedError

    def _params(self) -> dict:
        """JSON-serializable parameters that change the output (for :meth:`fingerprint`)."""
        return {"max_tokens": self.max_tokens}

    def _pool(self, word_vectors: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Phrase vectors from the known words of non-empty phrases.

        Parameters
        ----------
        word_vectors : ndarray [M, D] float64
            Known word vectors of all phrases, phrase after phrase.
        lengths : ndarray [N] int, all > 0
            Number of known words of each phrase.

        Returns
        -------
        ndarray [N, dim]
        """
        raise NotImplementedError

    def tokens(self, phrase: str) -> list:
        """Tokens of a normalized phrase, truncated to the last ``max_tokens``."""
        words = phrase.split()
        return words[-self.max_tokens:] if self.max_tokens else words

    def _known_word_rows(self, phrases: Sequence[str]) -> tuple:
        """Row indices into ``kv.vectors`` of each phrase's known tokens; updates :attr:`oov`.

        Returns
        -------
        rows : ndarray [M] int64
            Known-token rows, phrase after phrase.
        lengths : ndarray [N] int64
            Known tokens per phrase.
        """
        key_to_index = self.kv.key_to_index
        rows, lengths = [], np.zeros(len(phrases), dtype=np.int64)
        for i, phrase in enumerate(phrases):
            tokens = self.tokens(phrase)
            known = [key_to_index[t] for t in tokens if t in key_to_index]
            rows.extend(known)
            lengths[i] = len(known)
            self.oov.n_tokens += len(tokens)
            if len(known) < len(tokens):
                oov_tokens = [t for t in tokens if t not in key_to_index]
                self.oov.n_oov_tokens += len(oov_tokens)
                self.oov.oov_words.update(oov_tokens)
        self.oov.n_phrases += len(phrases)
        return np.asarray(rows, dtype=np.int64), lengths

    def _report_empty(self, empty: list, n_phrases: int) -> None:
        """Count phrases without a known word; warn (with examples) the first time only."""
        if not empty:
            return
        self.oov.n_empty_phrases += len(empty)
        log = logger.debug if self._warned_empty else logger.warning
        log("%s: %d of %d phrases have no word in the word vectors and encode to zeros, e.g. %s "
            "(further cases counted in encoder.oov)", type(self).__name__, len(empty), n_phrases,
            empty[:_N_EXAMPLES])
        self._warned_empty = True

    def encode(self, phrases: Sequence[str]) -> np.ndarray:
        """Encode normalized phrases.

        Parameters
        ----------
        phrases : sequence of str, length N

        Returns
        -------
        ndarray [N, dim] float32
            Zero rows for phrases without a known word.
        """
        if isinstance(phrases, str):
            raise TypeError("encode() takes a list of phrases, not a single string")
        phrases = list(phrases)
        out = np.zeros((len(phrases), self.dim), dtype=np.float32)
        empty = []
        for start in range(0, len(phrases), self.batch_size):
            batch = phrases[start:start + self.batch_size]
            rows, lengths = self._known_word_rows(batch)
            nonempty = lengths > 0
            empty.extend(p for p, ok in zip(batch, nonempty) if not ok)
            if rows.size:
                vectors = self.kv.vectors[rows].astype(np.float64)
                out[start:start + len(batch)][nonempty] = self._pool(vectors, lengths[nonempty])
        self._report_empty(empty, len(phrases))
        return out

    def fingerprint(self) -> str:
        """Hash of the encoder class, its parameters and its word vectors, for cache keys."""
        if self._kv_fingerprint is None:
            self._kv_fingerprint = keyed_vectors_fingerprint(self.kv)
        return _short_hash({"class": type(self).__name__, "params": self._params(),
                            "kv": self._kv_fingerprint})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dim={self.dim}, {self._params()})"


@_register("mean")
class MeanPoolEncoder(PhraseEncoder):
    """Mean of the phrase's known word vectors, L2-normalized; ``dim = kv.vector_size``."""

    @property
    def dim(self) -> int:
        return self.kv.vector_size

    def _pool(self, word_vectors: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        return _l2_normalize(_segment_mean(word_vectors, lengths))


@_register("fisher")
class FisherVectorEncoder(PhraseEncoder):
    """Improved Fisher vector (Perronnin et al. 2010) of a phrase's word vectors under a diagonal GMM.

    For the T known word vectors ``x_t`` of a phrase, GMM weights ``w_k``, means ``mu_k``,
    standard deviations ``sigma_k`` (per dimension) and posteriors ``gamma_t(k)``::

        G_mu_k    = 1 / (T sqrt(w_k))   sum_t gamma_t(k) (x_t - mu_k) / sigma_k
        G_sigma_k = 1 / (T sqrt(2 w_k)) sum_t gamma_t(k) [(x_t - mu_k)^2 / sigma_k^2 - 1]

    The vector is ``[G_mu_1..G_mu_K, G_sigma_1..G_sigma_K]`` (``dim = 2 K D``), then signed
    square root ``sign(z) sqrt(|z|)`` and L2 normalization.

    Parameters
    ----------
    kv : KeyedVectors
        Word vectors [V, D].
    n_components : int
        GMM components K.
    seed : int
        GMM ``random_state`` and the word subsample's seed.
    max_fit_words : int
        Default fit: at most this many words of ``kv``, a seeded uniform sample kept in ``kv`` order.
    max_tokens : int or None
        See :class:`PhraseEncoder`.

    The GMM is fitted by :meth:`fit` or, on first use, on ``kv``'s words.
    """

    batch_size = 256

    def __init__(self, kv: KeyedVectors, n_components: int = 8, seed: int = 0,
                 max_fit_words: int = 50000, max_tokens: Optional[int] = None):
        super().__init__(kv, max_tokens)
        self.n_components = n_components
        self.seed = seed
        self.max_fit_words = max_fit_words
        self.gmm: Optional[GaussianMixture] = None
        self._fit_words_hash = None  # None: default fit on kv's words

    @property
    def dim(self) -> int:
        return 2 * self.n_components * self.kv.vector_size

    def _params(self) -> dict:
        return {**super()._params(), "n_components": self.n_components, "seed": self.seed,
                "max_fit_words": self.max_fit_words, "fit_words": self._fit_words_hash,
                "sklearn": sklearn.__version__}

    def _default_fit_rows(self) -> np.ndarray:
        """Rows of ``kv`` to fit on: all, or a seeded sample of ``max_fit_words`` in ``kv`` order."""
        n = len(self.kv)
        if n <= self.max_fit_words:
            return np.arange(n)
        rng = np.random.default_rng(self.seed)
        return np.sort(rng.choice(n, size=self.max_fit_words, replace=False))

    def _fit_rows(self, rows: np.ndarray) -> "FisherVectorEncoder":
        if len(rows) < self.n_components:
            raise ValueError(f"cannot fit a {self.n_components}-component GMM on {len(rows)} words")
        gmm = GaussianMixture(n_components=self.n_components, covariance_type="diag",
                              random_state=self.seed)
        gmm.fit(self.kv.vectors[rows].astype(np.float64))
        self.gmm = gmm
        logger.info("fitted a %d-component diagonal GMM on %d word vectors of dimension %d",
                    self.n_components, len(rows), self.kv.vector_size)
        return self

    def fit(self, words: Optional[Iterable[str]] = None) -> "FisherVectorEncoder":
        """Fit the GMM on the vectors of ``words`` (OOV words ignored), or by default on ``kv``'s words.

        Returns
        -------
        FisherVectorEncoder
            ``self``.
        """
        if words is None:
            self._fit_words_hash = None
            return self._fit_rows(self._default_fit_rows())
        words = list(words)
        self._fit_words_hash = _short_hash(words)
        rows = [self.kv.key_to_index[w] for w in words if w in self.kv.key_to_index]
        return self._fit_rows(np.asarray(rows, dtype=np.int64))

    def _word_gradients(self, x: np.ndarray) -> np.ndarray:
        """Per-word Fisher vector terms (before the 1/T average).

        Parameters
        ----------
        x : ndarray [M, D] float64

        Returns
        -------
        ndarray [M, 2 K D]
        """
        gmm = self.gmm
        gamma = gmm.predict_proba(x)[:, :, None]                           # [M, K, 1]
        sigma = np.sqrt(gmm.covariances_)                                   # [K, D]
        diff = (x[:, None, :] - gmm.means_[None]) / sigma[None]            # [M, K, D]
        sqrt_w = np.sqrt(gmm.weights_)[None, :, None]                       # [1, K, 1]
        g_mu = gamma * diff / sqrt_w
        g_sigma = gamma * (diff ** 2 - 1.0) / (np.sqrt(2.0) * sqrt_w)
        m = len(x)
        return np.concatenate([g_mu.reshape(m, -1), g_sigma.reshape(m, -1)], axis=1)

    def _pool(self, word_vectors: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        if self.gmm is None:
            self.fit()
        fv = _segment_mean(self._word_gradients(word_vectors), lengths)
        return _l2_normalize(np.sign(fv) * np.sqrt(np.abs(fv)))


def build_phrase_encoder(name: str, kv: KeyedVectors, **kwargs) -> PhraseEncoder:
    """``PHRASE_ENCODER_REGISTRY.get(name)(kv, **kwargs)``; ``name`` is ``"mean"`` or ``"fisher"``."""
    return PHRASE_ENCODER_REGISTRY.get(name)(kv, **kwargs)


def _unique(phrases: Iterable[str]) -> list:
    """Phrases without repeats, in first-occurrence order."""
    return list(dict.fromkeys(phrases))


class EncodedVocabulary:
    """Phrase vectors computed once per phrase and served by phrase.

    Parameters
    ----------
    encoder : PhraseEncoder
        Anything with ``dim``, ``encode(phrases) -> [N, dim]`` and ``fingerprint()``.
    phrases : iterable of str
        Phrases to encode now (repeats ignored); with ``cache_dir`` they are loaded from, or
        saved to, ``<cache_dir>/encoded_<encoder fingerprint>_<phrase list hash>.npz``.
    cache_dir : str, optional
        Folder of the ``.npz`` cache.
    """

    def __init__(self, encoder: PhraseEncoder, phrases: Iterable[str] = (),
                 cache_dir: Optional[str] = None):
        self.encoder = encoder
        self.cache_dir = cache_dir
        self._phrases: list = []
        self._index: dict = {}
        self._buffer = np.zeros((0, encoder.dim), dtype=np.float32)
        initial = _unique(phrases)
        if not initial:
            return
        if cache_dir is not None and self._load(initial):
            return
        self.add(initial)
        if cache_dir is not None:
            self.save()

    # ---- storage -------------------------------------------------------------------------

    @property
    def phrases(self) -> list:
        """Encoded phrases in row order (a copy)."""
        return list(self._phrases)

    @property
    def matrix(self) -> np.ndarray:
        """Read-only ``[V, dim]`` float32 view of the phrase vectors, row ``i`` = ``phrases[i]``."""
        view = self._buffer[:len(self._phrases)].view()
        view.flags.writeable = False
        return view

    def _append(self, phrases: list, rows: np.ndarray) -> None:
        """Store new rows, growing the buffer geometrically (amortized O(1) per phrase)."""
        n, needed = len(self._phrases), len(self._phrases) + len(phrases)
        if needed > len(self._buffer):
            grown = np.zeros((max(needed, 2 * len(self._buffer)), self._buffer.shape[1]), np.float32)
            grown[:n] = self._buffer[:n]
            self._buffer = grown
        self._buffer[n:needed] = rows
        for i, phrase in enumerate(phrases, start=n):
            self._index[phrase] = i
        self._phrases.extend(phrases)

    def add(self, phrases: Iterable[str]) -> int:
        """Encode (in one ``encoder.encode`` call) the phrases not encoded yet.

        Returns
        -------
        int
            Number of newly encoded phrases.
        """
        new = [p for p in _unique(phrases) if p not in self._index]
        if new:
            self._append(new, self.encoder.encode(new))
        return len(new)

    # ---- lookup --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._phrases)

    def __contains__(self, phrase: str) -> bool:
        return phrase in self._index

    def index(self, phrase: str) -> int:
        """Row of an already encoded ``phrase`` in :attr:`matrix` (``KeyError`` if not encoded)."""
        return self._index[phrase]

    def lookup(self, phrases: Sequence[str]) -> np.ndarray:
        """Vectors of ``phrases`` in the given order, encoding missing ones first.

        Returns
        -------
        ndarray [N, dim] float32
            A copy.
        """
        if isinstance(phrases, str):
            raise TypeError("lookup() takes a list of phrases; use vocab[phrase] for one")
        phrases = list(phrases)
        self.add(phrases)
        rows = np.fromiter((self._index[p] for p in phrases), dtype=np.int64, count=len(phrases))
        return self._buffer[rows]

    def __getitem__(self, phrase: str) -> np.ndarray:
        """Vector ``[dim]`` of one phrase (encoded on the fly if missing)."""
        return self.lookup([phrase])[0]

    # ---- cache ---------------------------------------------------------------------------

    def cache_path(self, phrases: Optional[Sequence[str]] = None) -> str:
        """Cache file of ``phrases`` (default: the encoded ones) under ``cache_dir``."""
        if self.cache_dir is None:
            raise ValueError("EncodedVocabulary has no cache_dir")
        phrases = self._phrases if phrases is None else phrases
        name = f"encoded_{self.encoder.fingerprint()}_{_short_hash(list(phrases))}.npz"
        return os.path.join(self.cache_dir, name)

    def save(self) -> str:
        """Write the encoded phrases and vectors to :meth:`cache_path` (atomically); returns the path."""
        path = self.cache_path()
        os.makedirs(self.cache_dir, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".npz.tmp", dir=self.cache_dir)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, matrix=self.matrix, phrases=np.asarray(self._phrases, dtype=np.str_),
                         fingerprint=np.asarray(self.encoder.fingerprint()))
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        logger.info("saved %d encoded phrases to %s", len(self), path)
        return path

    def _load(self, phrases: list) -> bool:
        """Fill from the cache file of ``phrases`` if it exists, reads and matches; returns success.

        A cache file that does not read (damaged, truncated, keys missing or of another shape or
        type, values that are not finite) or that was written for other phrases or another
        encoder is ignored with a warning naming it: the phrases are encoded again and the
        caller replaces the file.
        """
        path = self.cache_path(phrases)
        if not os.path.isfile(path):
            return False
        try:
            matrix, stored, fingerprint = _read_cache(path)
        except BadFileError as e:
            logger.warning("ignoring the damaged cache %s (%s); encoding the phrases again", path, e)
            return False
        if (stored != phrases or fingerprint != self.encoder.fingerprint()
                or matrix.shape != (len(phrases), self.encoder.dim)):
            logger.warning("ignoring cache %s: it does not match the phrases or the encoder", path)
            return False
        self._append(phrases, matrix.astype(np.float32, copy=False))
        logger.info("loaded %d encoded phrases from %s", len(phrases), path)
        return True


def _read_cache(path: str) -> tuple:
    """``(matrix [V, dim] float, phrases list, fingerprint str)`` of an :class:`EncodedVocabulary`
    cache file; a BadFileError naming the file (and key) when it does not read."""
    data = load_array_file(path, "encoded vocabulary cache")
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise BadFileError(f"{path}: expected a .npz with keys matrix, phrases, fingerprint; got a single array")
    with data:
        matrix, phrases, fingerprint = (npz_array(data, path, key) for key in ("matrix", "phrases", "fingerprint"))
    if matrix.ndim != 2 or matrix.dtype.kind != "f" or not np.isfinite(matrix).all():
        raise BadFileError(f"{path}: key 'matrix': expected a 2-D array of finite floats, got dtype {matrix.dtype} "
                           f"and shape {matrix.shape}")
    return matrix, phrases.tolist(), str(fingerprint)
