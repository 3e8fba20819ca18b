"""Reading helpers of the caption readers: caption cleaning and the caption record; the file
readers and the record check they use come from :mod:`phrasedet.fileio` (re-exported here).
"""
from phrasedet.fileio import check_record, load_json_file, read_text_lines, record_where
from phrasedet.text import nfc

from .common import BadAnnotationError

__all__ = ["read_text_lines", "load_json_file", "check_record", "record_where", "clean_caption", "caption_record"]


def clean_caption(text, where):
    """``text`` in Unicode NFC (:func:`phrasedet.text.nfc`), runs of whitespace collapsed to single
    spaces and the ends stripped.

    Raises:
        BadAnnotationError: naming ``where`` when ``text`` is not a string or is empty.
    """
    if not isinstance(text, str):
        raise BadAnnotationError(f"{where}: caption is not a string: {text!r}")
    caption = " ".join(nfc(text).split())
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
