"""Fuzzing readers with Hypothesis: damaged copies of a valid file, and the rule every reader keeps.

A reader given a damaged file must either load it (a damage it tolerates, or a logged, counted
skip), or raise :class:`phrasedet.fileio.BadFileError` whose message names the file. Any other
exception (a bare ``KeyError``, ``TypeError``, ``IndexError``, ``UnicodeDecodeError``, a
``BadFileError`` that does not say which file) fails the test, with the damaged bytes Hypothesis
found printed.

Damages (:func:`damaged_bytes`): truncation, one byte replaced (UTF-8 breakers included),
a span deleted, the empty file, a byte-order mark prepended. JSON files also get structural
damages (:func:`damaged_json`): a key deleted or a value replaced by one of another type, at
any depth.

Usage::

    @fuzz_settings
    @given(data=damaged_bytes(VALID))
    def test_reader(tmp_path_factory, data):
        check_reader(read_it, write_file(tmp_path_factory, "x.txt", data))
"""
import json
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from phrasedet.fileio import BadFileError

__all__ = ["fuzz_settings", "damaged_bytes", "damaged_json", "check_reader", "write_file"]

#: Few examples per reader so the whole suite stays fast; derandomized so CI is repeatable.
fuzz_settings = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                         suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

_BAD_BYTES = [0xFF, 0xC3, 0x80, 0x00, ord("{"), ord("\n"), ord('"'), ord(" "), ord("-"), ord("x")]


def damaged_bytes(data: bytes):
    """A strategy of damaged copies of ``data``."""
    n = len(data)
    truncated = st.integers(0, max(n - 1, 0)).map(lambda k: data[:k])
    flipped = st.tuples(st.integers(0, max(n - 1, 0)), st.sampled_from(_BAD_BYTES)).map(
        lambda kb: data[: kb[0]] + bytes([kb[1]]) + data[kb[0] + 1:])
    deleted = st.tuples(st.integers(0, n), st.integers(1, 64)).map(lambda ks: data[: ks[0]] + data[ks[0] + ks[1]:])
    return st.one_of(truncated, flipped, deleted, st.just(b""), st.just("\ufeff".encode() + data))


def _paths(obj, prefix=()):
    """Every path (tuple of keys/indices) to a value inside ``obj``."""
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, list):
        items = enumerate(obj)
    else:
        return
    for key, value in items:
        yield prefix + (key,)
        yield from _paths(value, prefix + (key,))


_OTHER_VALUES = [None, "x", "", -1, 0, 1.5, float("nan"), True, [], {}, [1, 2], {"a": 1}]


def _apply(obj, path, action, value):
    obj = json.loads(json.dumps(obj))  # deep copy
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    if action == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return obj


def damaged_json(obj, dump=lambda o: json.dumps(o).encode()):
    """A strategy of files (bytes) holding ``obj`` with a key deleted or a value of another type,
    or any damage of :func:`damaged_bytes` to ``dump(obj)``."""
    paths = list(_paths(obj))
    structural = st.tuples(st.sampled_from(paths), st.sampled_from(["delete", "replace"]), st.sampled_from(_OTHER_VALUES)).map(
        lambda t: dump(_apply(obj, *t)))
    return st.one_of(structural, damaged_bytes(dump(obj)))


def write_file(tmp_path_factory, name, data: bytes) -> str:
    """``data`` written to a new folder as ``name`` (subfolders created); returns the path."""
    path = os.path.join(str(tmp_path_factory.mktemp("fuzz")), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def check_reader(read, path, names=None):
    """Call ``read()``; it may return, or raise a BadFileError naming the file.

    Args:
        path: the damaged file; its base name (or one of ``names``) must be in the message.
    Returns:
        what ``read()`` returned, or the BadFileError raised.
    """
    names = names or [os.path.basename(path)]
    try:
        return read()
    except BadFileError as e:
        assert any(name in str(e) for name in names), f"error does not name {names}: {e}"
        return e
