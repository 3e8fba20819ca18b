"""Reading helpers for the caption readers: UTF-8 text lines and JSON whose errors name the
file, line, column and byte; JSON key checks; caption cleaning; the caption record.

Every error is a :class:`BadAnnotationError` (or ``FileNotFoundError``) whose message starts
with the file (``path:line:column`` where there is a position), so a user can open the spot.
"""
import json
import os

from .common import BadAnnotationError

__all__ = ["read_text_lines", "load_json_file", "require_keys", "clean_caption", "caption_record"]

_BOM = "\ufeff"


def _read_bytes(path, what):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist")
    with open(path, "rb") as f:
        return f.read()


def _position(data, offset):
    """1-based (line, column) of byte ``offset`` in ``data``; the column counts bytes."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


def _decode(data, path):
    """``data`` as UTF-8 text, a leading byte-order mark removed."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, column = _position(data, e.start)
        raise BadAnnotationError(
            f"{path}:{line}:{column}: byte 0x{data[e.start]:02x} (byte offset {e.start}) is not valid UTF-8"
        ) from None
    return text[1:] if text.startswith(_BOM) else text


def read_text_lines(path, what="file"):
    """The lines of a UTF-8 text file, without line ends, in file order.

    Lines end at ``\\n`` only (a ``\\r`` before it is dropped), as when a release's own code reads
    the file line by line, so line numbers match an editor's. A final line end adds no empty line.
    A byte-order mark at the start is removed.

    Args:
        what: how a missing file is called in the ``FileNotFoundError`` (e.g. ``"token file"``).

    Raises:
        BadAnnotationError: ``path:line:column`` and the byte, for a byte that is not UTF-8.
    """
    lines = _decode(_read_bytes(path, what), path).split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def load_json_file(path, what="JSON file"):
    """The parsed contents of a UTF-8 JSON file (a leading byte-order mark removed).

    Raises:
        BadAnnotationError: naming the file, line, column and byte offset of a syntax error or
            of a byte that is not UTF-8.
    """
    data = _read_bytes(path, what)
    text = _decode(data, path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        offset = len(data) - len(text.encode("utf-8")) + len(text[:e.pos].encode("utf-8"))
        raise BadAnnotationError(
            f"{path}:{e.lineno}:{e.colno}: invalid JSON (byte offset {offset}): {e.msg}"
        ) from None


def require_keys(obj, keys, where):
    """Raise naming ``where`` and the key when ``obj`` is not a JSON object holding every key."""
    if not isinstance(obj, dict):
        raise BadAnnotationError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    for key in keys:
        if key not in obj:
            raise BadAnnotationError(f"{where}: missing key {key!r}")


def clean_caption(text, where):
    """``text`` with runs of whitespace collapsed to single spaces and the ends stripped.

    Raises:
        BadAnnotationError: naming ``where`` when ``text`` is not a string or is empty.
    """
    if not isinstance(text, str):
        raise BadAnnotationError(f"{where}: caption is not a string: {text!r}")
    caption = " ".join(text.split())
    if not caption:
        raise BadAnnotationError(f"{where}: empty caption")
    return caption


def caption_record(file_name, image_id, dataset, captions, caption_ids, **extra):
    """One image of a caption dataset (the record contract in docs/DATA.md, "Caption datasets").

    ``extra``: ``height``/``width`` when the source gives them, ``feature_file``/``feature_row``
    for precomputed features. There is no ``annotations`` key.
    """
    assert len(captions) == len(caption_ids), (image_id, captions, caption_ids)
    return dict(file_name=file_name, image_id=image_id, dataset=dataset, captions=list(captions),
                caption_ids=list(caption_ids), **extra)
