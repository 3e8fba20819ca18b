"""Reading the generator's own record of a built-in dataset (``<root>/ground_truth.json``): the
scenes of a split, in its list file's order. Shared by the specificity measure, the fact labels of
the representation probe and the oracle representation."""
import os
from typing import List, Tuple

from phrasedet.fileio import load_json_file, read_text_lines

__all__ = ["SPLITS", "load_ground_truth", "load_language", "split_image_ids", "split_scenes"]

SPLITS = ("train", "val", "test")


def load_ground_truth(root: str) -> dict:
    """``ground_truth.json``'s ``images``: {image id: record} (``background``, ``objects``, ...)."""
    return load_json_file(os.path.join(root, "ground_truth.json"), "built-in ground truth")["images"]


def load_language(root: str):
    """The :class:`.language.Language` a built-in dataset's captions are written in: its
    ``ground_truth.json``'s ``parameters.language`` (absent in version 3's files: ``v3``)."""
    from .language import get_language

    truth = load_json_file(os.path.join(root, "ground_truth.json"), "built-in ground truth")
    return get_language(truth.get("parameters", {}).get("language", "v3"))


def split_image_ids(root: str, split: str) -> List[str]:
    """The image ids of ``flickr30k_entities/<split>.txt``, in order, blank lines skipped."""
    path = os.path.join(root, "flickr30k_entities", f"{split}.txt")
    return [line.strip() for line in read_text_lines(path, f"{split} image list") if line.strip()]


def split_scenes(root: str, split: str, images: dict = None) -> Tuple[List[str], List[dict]]:
    """(image ids, scenes) of a split in its list's order; a scene is ``{"background", "objects"}``.

    Raises:
        KeyError: naming the image of the list that the ground truth lacks.
    """
    images = load_ground_truth(root) if images is None else images
    ids = split_image_ids(root, split)
    scenes = []
    for image_id in ids:
        if image_id not in images:
            raise KeyError(f"{root}/ground_truth.json has no image {image_id!r} of {split}.txt")
        scenes.append({"background": images[image_id]["background"], "objects": images[image_id]["objects"]})
    return ids, scenes
