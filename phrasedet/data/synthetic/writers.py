"""Writers of the built-in dataset in the on-disk formats of Flickr30K Entities and refclef.

Formats: ``/work/shared/docs/data_formats.md`` and ``docs/DATA.md``. Everything is written
with explicit ordering so that the same inputs give byte-identical files.
"""
import json
import os
import pickle
import shutil
from typing import Iterable

__all__ = ["annotation_xml", "write_text", "write_flickr_split_files", "write_unrelated",
           "refclef_image_path", "link_or_copy", "write_refclef"]

SPLITS = ("train", "val", "test")


def write_text(path: str, text: str) -> None:
    """Write UTF-8 text with ``\\n`` newlines, creating parent folders."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def annotation_xml(image_id: str, width: int, height: int, boxes: Iterable, nobox: Iterable) -> str:
    """Flickr30K Entities ``Annotations/<id>.xml`` text.

    Parameters
    ----------
    boxes : iterable of (names, (x0, y0, x1, y1))
        One ``<object>`` per box: its chain ids and its 0-based inclusive pixel extent,
        written 1-based inclusive (``xmin = x0 + 1``, ``xmax = x1 + 1``).
    nobox : iterable of (name, scene)
        Chains without a box: ``scene=True`` writes ``<nobndbox>0</nobndbox><scene>1</scene>``,
        ``False`` writes ``<nobndbox>1</nobndbox><scene>0</scene>``.
    """
    lines = ["<annotation>", f"  <filename>{image_id}.jpg</filename>", "  <size>",
             f"    <width>{width}</width>", f"    <height>{height}</height>", "    <depth>3</depth>",
             "  </size>"]
    for names, (x0, y0, x1, y1) in boxes:
        lines.append("  <object>")
        lines += [f"    <name>{n}</name>" for n in names]
        lines += ["    <bndbox>", f"      <xmin>{x0 + 1}</xmin>", f"      <ymin>{y0 + 1}</ymin>",
                  f"      <xmax>{x1 + 1}</xmax>", f"      <ymax>{y1 + 1}</ymax>", "    </bndbox>",
                  "  </object>"]
    for name, scene in nobox:
        lines += ["  <object>", f"    <name>{name}</name>",
                  f"    <nobndbox>{0 if scene else 1}</nobndbox>", f"    <scene>{1 if scene else 0}</scene>",
                  "  </object>"]
    lines.append("</annotation>")
    return "\n".join(lines) + "\n"


def write_flickr_split_files(flickr_dir: str, split_ids: dict) -> None:
    """``train.txt``, ``val.txt``, ``test.txt``: one image id per line."""
    for split in SPLITS:
        write_text(os.path.join(flickr_dir, f"{split}.txt"),
                   "".join(f"{i}\n" for i in split_ids.get(split, [])))


def write_unrelated(flickr_dir: str, entries: Iterable) -> None:
    """``UNRELATED_CAPTIONS``: a header then ``<imageID> <sentence number>`` (1-based) lines."""
    body = "".join(f"{image_id} {index + 1}\n" for image_id, index in entries)
    write_text(os.path.join(flickr_dir, "UNRELATED_CAPTIONS"),
               "# format: <imageID> <sentence number>\n" + body)


def refclef_image_path(root: str, image_id: str) -> str:
    """``<root>/images/saiapr_tc-12/<dd>/images/<id>.jpg`` with ``dd = id // 1000 % 100``."""
    return os.path.join(root, "images", "saiapr_tc-12", f"{int(image_id) // 1000 % 100:02d}",
                        "images", f"{image_id}.jpg")


def link_or_copy(src: str, dst: str) -> None:
    """Hard-link ``src`` to ``dst`` (copy where links are not possible)."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.lexists(dst):
        os.remove(dst)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def write_refclef(refclef_dir: str, images: list, annotations: list, categories: list, refs: list) -> None:
    """``instances.json`` (COCO style) and ``refs(berkeley).p`` / ``refs(unc).p`` (pickle protocol 2).

    Parameters
    ----------
    images, annotations, categories : list of dict
        COCO ``images`` / ``annotations`` / ``categories`` entries.
    refs : list of dict
        REFER-API refs; both splitBy files get the same refs.
    """
    os.makedirs(refclef_dir, exist_ok=True)
    instances = {"images": images, "annotations": annotations, "categories": categories}
    with open(os.path.join(refclef_dir, "instances.json"), "w", encoding="utf-8") as f:
        json.dump(instances, f)
    for split_by in ("berkeley", "unc"):
        with open(os.path.join(refclef_dir, f"refs({split_by}).p"), "wb") as f:
            pickle.dump(refs, f, protocol=2)
