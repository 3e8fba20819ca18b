"""Reading user files, for every reader of the package: UTF-8 text lines, JSON, pickles and numpy
arrays whose errors name the file (and line, column, byte, record and key), and the one check of
records read by key (:func:`check_record`).

It imports nothing of phrasedet, so the text pipeline, the dataset loaders, the models and the
evaluators all read files through it. Every error is a :class:`BadFileError` (a ``ValueError``)
or a ``FileNotFoundError`` whose message starts with the file (``path:line:column`` where there is
a position), so a user can open the spot. The documented exceptions to UTF-8: none; a byte-order
mark at the start of a text or JSON file is removed.
"""
import json
import math
import os
import pickle

__all__ = [
    "BadFileError", "read_bytes", "decode_utf8", "iter_text_lines", "read_text_lines", "load_json_file", "load_pickle_file",
    "load_array_file", "npz_array", "check_record", "record_where", "is_number",
]

_BOM = "\ufeff"
_NPY_MAGIC, _ZIP_MAGIC = b"\x93NUMPY", b"PK\x03\x04"


class BadFileError(ValueError):
    """A file given to phrasedet is malformed. The message starts with the file and names the
    line, record or key."""


def read_bytes(path, what="file"):
    """The bytes of ``path``; ``FileNotFoundError`` naming it as ``what`` when it does not exist."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist")
    with open(path, "rb") as f:
        return f.read()


def _position(data, offset):
    """1-based (line, column) of byte ``offset`` in ``data``; the column counts bytes."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


def decode_utf8(data, path):
    """``data`` as UTF-8 text, a leading byte-order mark removed.

    Raises:
        BadFileError: ``path:line:column``, the byte and its offset, for a byte that is not UTF-8.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, column = _position(data, e.start)
        raise BadFileError(
            f"{path}:{line}:{column}: byte 0x{data[e.start]:02x} (byte offset {e.start}) is not valid UTF-8"
        ) from None
    return text[1:] if text.startswith(_BOM) else text


def iter_text_lines(path, what="file"):
    """The lines of a UTF-8 text file, without line ends, in file order, read one at a time (for
    files too large to hold, e.g. predictions at Flickr30K scale).

    Lines end at ``\\n`` only (a ``\\r`` before it is dropped), as when a release's own code reads
    the file line by line, so line numbers match an editor's. A final line end adds no empty line.
    A byte-order mark at the start is removed.

    Args:
        what: how a missing file is called in the ``FileNotFoundError`` (e.g. ``"token file"``).

    Raises:
        BadFileError: ``path:line:column``, the byte and its offset, for a byte that is not UTF-8.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist")
    offset = 0
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise BadFileError(f"{path}:{n}:{e.start + 1}: byte 0x{raw[e.start]:02x} (byte offset "
                                   f"{offset + e.start}) is not valid UTF-8") from None
            offset += len(raw)
            if n == 1 and line.startswith(_BOM):
                line = line[1:]
            line = line[:-1] if line.endswith("\n") else line
            yield line[:-1] if line.endswith("\r") else line


def read_text_lines(path, what="file"):
    """All lines of a UTF-8 text file (:func:`iter_text_lines`) as a list."""
    return list(iter_text_lines(path, what))


def _parse_json(text, data, path):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        offset = len(data) - len(text.encode("utf-8")) + len(text[:e.pos].encode("utf-8"))
        raise BadFileError(f"{path}:{e.lineno}:{e.colno}: invalid JSON (byte offset {offset}): {e.msg}") from None
    except RecursionError:
        raise BadFileError(f"{path}: invalid JSON: nested too deeply") from None
    except ValueError as e:  # an integer of more than sys.get_int_max_str_digits() digits
        raise BadFileError(f"{path}: invalid JSON: {e}") from None


def load_json_file(path, what="JSON file"):
    """The parsed contents of a UTF-8 JSON file (a leading byte-order mark removed).

    Raises:
        BadFileError: naming the file, line, column and byte offset of a syntax error or of a
            byte that is not UTF-8.
    """
    data = read_bytes(path, what)
    return _parse_json(decode_utf8(data, path), data, path)


def parse_json_line(line, path, line_no):
    """One record of a JSON-lines file; ``path:line: invalid JSON`` on a syntax error."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise BadFileError(f"{path}:{line_no}:{e.colno}: invalid JSON: {e.msg}") from None
    except RecursionError:
        raise BadFileError(f"{path}:{line_no}: invalid JSON: nested too deeply") from None
    except ValueError as e:  # an integer of more than sys.get_int_max_str_digits() digits
        raise BadFileError(f"{path}:{line_no}: invalid JSON: {e}") from None


def load_pickle_file(path, what="pickle file", encoding="ASCII"):
    """The unpickled contents of ``path`` (``encoding="latin1"`` for a file written by Python 2).

    Pickles run code when loaded: read only files you trust (as with the releases' own code).

    Raises:
        BadFileError: naming the file and what the unpickler said, for a truncated or corrupt file.
    """
    data = read_bytes(path, what)
    if not data:
        raise BadFileError(f"{path}: empty file (expected a pickle)")
    try:
        return pickle.loads(data, encoding=encoding)
    except Exception as e:  # unpickling can raise almost anything on corrupt bytes
        raise BadFileError(f"{path}: cannot unpickle: {type(e).__name__}: {e}") from None


def load_array_file(path, what="array file", mmap_mode=None):
    """``np.load`` of a ``.npy``/``.npz`` file without pickles.

    Raises:
        FileNotFoundError: naming ``what`` and the path.
        BadFileError: naming the file, for anything numpy cannot read.
    """
    import numpy as np

    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist")
    with open(path, "rb") as f:
        magic = f.read(6)
    if not magic.startswith((_NPY_MAGIC, _ZIP_MAGIC)):  # numpy would take it for a pickle and say so
        raise BadFileError(f"{path}: not a numpy file (a .npy starts with \\x93NUMPY, a .npz with PK; "
                           f"this one starts with {magic!r})")
    try:
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except Exception as e:  # numpy raises ValueError, OSError, EOFError, zipfile.BadZipFile ...
        raise BadFileError(f"{path}: not a readable numpy file ({type(e).__name__}: {e})") from None


def npz_array(npz, path, key):
    """``npz[key]``, the array ``key`` of a ``.npz`` opened by :func:`load_array_file`.

    Raises:
        BadFileError: ``path: missing key`` (with the keys the file holds), or naming the file and
            the key when numpy cannot read that member (a damaged zip member: bad CRC, truncated).
    """
    if key not in npz.files:
        raise BadFileError(f"{path}: missing key {key!r} (the file holds {sorted(npz.files)})")
    try:
        return npz[key]
    except Exception as e:  # zipfile.BadZipFile, zlib.error, EOFError, ValueError ...
        raise BadFileError(f"{path}: key {key!r}: cannot read the array ({type(e).__name__}: {e})") from None


def is_number(x) -> bool:
    """An int or float that is not a bool (JSON ``true`` is not a number)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_finite(x) -> bool:
    """A finite number (not an integer too large for a float: converting it would overflow)."""
    try:
        return is_number(x) and math.isfinite(x)
    except OverflowError:
        return False


#: The kinds :func:`check_record` knows: name -> (test, how the message says it).
KINDS = {
    "any": (lambda v: True, "anything"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "int": (_is_int, "an integer"),
    "int_or_str": (lambda v: _is_int(v) or isinstance(v, str), "an integer or a string"),
    "number": (lambda v: _is_finite(v) or (isinstance(v, float) and math.isinf(v)), "a number"),  # not NaN
    "finite": (_is_finite, "a finite number"),
    "positive": (lambda v: _is_finite(v) and v > 0, "a positive number"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "dict": (lambda v: isinstance(v, dict), "a JSON object"),
    "str_list": (lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v), "a list of strings"),
    "box4": (lambda v: isinstance(v, (list, tuple)) and len(v) == 4 and all(_is_finite(x) for x in v),
             "4 finite numbers"),
}


def check_record(record, fields, where, error=BadFileError):
    """Check that ``record`` is a dict holding every key of ``fields`` with a value of its kind.

    Args:
        fields: ``{key: kind}``, a kind being a name of :data:`KINDS` (``"str"``, ``"int"``,
            ``"number"``, ``"positive"``, ``"list"``, ``"box4"``, ...), or a sequence of keys
            (any value).
        where: how the message names the record: the file and the record's index or id, e.g.
            ``"instances.json: annotations[3] (id 17)"`` (:func:`record_where`).
        error: the exception class raised (a :class:`BadFileError` subclass).

    Returns:
        ``record``, so a reader can write ``rec = check_record(raw, {...}, where)``.

    Raises:
        ``error`` naming ``where`` and the missing or ill-typed key (and the value found).
    """
    if not isinstance(record, dict):
        raise error(f"{where}: expected a JSON object, got {type(record).__name__} {_short(record)}")
    if not isinstance(fields, dict):
        fields = {key: "any" for key in fields}
    for key, kind in fields.items():
        if key not in record:
            raise error(f"{where}: missing key {key!r}")
        test, name = KINDS[kind]
        if not test(record[key]):
            raise error(f"{where}: key {key!r} must be {name}, got {_short(record[key])}")
    return record


def record_where(path, part, index, record=None, id_key="id"):
    """``"<path>: <part>[<index>]"``, with ``" (<id_key> <id>)"`` when ``record`` has one."""
    where = f"{path}: {part}[{index}]" if part else f"{path}: record {index}"
    if isinstance(record, dict) and id_key in record and isinstance(record[id_key], (int, str)):
        where += f" ({id_key} {record[id_key]!r})"
    return where


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
