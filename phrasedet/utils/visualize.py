"""Draw phrase detections (and ground truth) with Detectron2's ``Visualizer``.

- :func:`draw_phrase_detections`: one box per phrase, labelled ``"phrase score"``, one colour per
  phrase; ground-truth boxes of the same phrase dashed and thinner in the same colour. Small images
  (the built-in dataset is ~128 px) are upscaled by an integer factor so the labels are readable.
- :func:`predict_phrases`: top-1 box and score of each phrase for one image, from a ``PhraseRCNN``.
- :func:`save_test_visualizations`: PNGs of the first images of a dataset, asked about their own
  ground-truth phrases.
"""
import math
import os
from typing import List, Optional, Sequence, Tuple

import matplotlib as mpl
import numpy as np
import torch
from detectron2.data import DatasetCatalog
from detectron2.data import detection_utils as utils
from detectron2.data import transforms as T
from detectron2.utils.colormap import colormap
from detectron2.utils.visualizer import Visualizer
from PIL import Image

from phrasedet.text import normalize_phrase

__all__ = [
    "phrase_colors",
    "upscale_factor",
    "draw_phrase_detections",
    "build_test_resize",
    "predict_phrases",
    "save_test_visualizations",
]

MAX_PHRASES_PER_IMAGE = 6




def phrase_colors(n: int) -> List[np.ndarray]:
    """``n`` distinct RGB colours in [0, 1] (Detectron2's colormap, in order; cycles after 74)."""
    cmap = colormap(rgb=True, maximum=1)
    return [cmap[i % len(cmap)] for i in range(n)]


def upscale_factor(height: int, width: int, min_size: int) -> int:
    """Smallest integer factor that brings the shorter side to at least ``min_size`` (>= 1)."""
    short = min(int(height), int(width))
    if short <= 0 or min_size is None or min_size <= short:
        return 1
    return int(math.ceil(min_size / short))


def _as_box_array(boxes, n: int) -> np.ndarray:
    if isinstance(boxes, torch.Tensor):
        boxes = boxes.detach().cpu().numpy()
    arr = np.asarray(boxes, dtype=np.float64)
    if n == 0:
        return arr.reshape(0, 4)
    return arr.reshape(n, 4)


def draw_phrase_detections(
    image_rgb: np.ndarray,
    phrases: Sequence[str],
    boxes,
    scores,
    gt_boxes: Optional[Sequence] = None,
    min_size: int = 512,
) -> np.ndarray:
    """Draw one detection per phrase (and optionally its ground truth) on an RGB image.

    Args:
        image_rgb: H x W x 3 uint8 RGB image.
        phrases: P phrase strings.
        boxes: [P, 4] xyxy boxes in ``image_rgb``'s coordinates (array or tensor).
        scores: [P] scores; a phrase with a non-finite score (no detection) gets no box.
        gt_boxes: optional, per phrase an [M, 4] array of its ground-truth boxes (M may be 0),
            drawn dashed and thinner in the phrase's colour.
        min_size: the image is upscaled by the smallest integer factor that makes its shorter
            side at least ``min_size`` (nearest neighbour, so pixels stay sharp); boxes follow.

    Returns:
        (s*H) x (s*W) x 3 uint8 RGB image, ``s`` = :func:`upscale_factor`.
    """
    image_rgb = np.asarray(image_rgb)
    if image_rgb.ndim != 3 or image_rgb.shape[2] != 3:
        raise ValueError(f"image_rgb must be H x W x 3, got shape {image_rgb.shape}")
    phrases = list(phrases)
    P = len(phrases)
    boxes = _as_box_array(boxes, P)
    if isinstance(scores, torch.Tensor):
        scores = scores.detach().cpu().numpy()
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if len(scores) != P:
        raise ValueError(f"{P} phrases but {len(scores)} scores")
    if gt_boxes is not None and len(gt_boxes) != P:
        raise ValueError(f"{P} phrases but ground truth for {len(gt_boxes)}")

    h, w = image_rgb.shape[:2]
    s = upscale_factor(h, w, min_size)
    img = image_rgb.astype(np.uint8, copy=False)
    if s > 1:
        img = np.repeat(np.repeat(img, s, axis=0), s, axis=1)
    vis = Visualizer(img, metadata=None, scale=1.0)
    linewidth = max(vis._default_font_size / 4, 1)
    ax = vis.output.ax
    colors = phrase_colors(P)

    # ground truth first, so detections are drawn over it
    if gt_boxes is not None:
        for color, gts in zip(colors, gt_boxes):
            for x0, y0, x1, y1 in _as_box_array(gts, len(gts)) * s:
                ax.add_patch(
                    mpl.patches.Rectangle(
                        (x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor=color,
                        linewidth=max(linewidth * 0.6, 1), linestyle="--", alpha=0.9, zorder=4,
                    )
                )
    # detections, labels stacked downwards when two would start at the same place
    line_height = vis._default_font_size * 1.6
    taken = []
    for phrase, box, score, color in zip(phrases, boxes * s, scores, colors):
        if not (np.isfinite(score) and np.all(np.isfinite(box))):
            continue
        x0, y0, x1, y1 = box
        ax.add_patch(
            mpl.patches.Rectangle(
                (x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor=color,
                linewidth=linewidth, linestyle="-", alpha=1.0, zorder=5,
            )
        )
        tx, ty = x0 + linewidth, y0 + linewidth
        while any(abs(tx - ox) < line_height * 4 and abs(ty - oy) < line_height for ox, oy in taken):
            ty += line_height
        ty = min(ty, max(img.shape[0] - line_height, 0))
        taken.append((tx, ty))
        vis.draw_text(
            f"{phrase} {score:.2f}", (tx, ty), color=vis._change_color_brightness(color, 0.7),
            horizontal_alignment="left",
        )
    return vis.output.get_image()


def build_test_resize(cfg) -> T.Augmentation:
    """The test-time resize of the config (``ResizeShortestEdge(INPUT.MIN_SIZE_TEST, INPUT.MAX_SIZE_TEST)``),
    as Detectron2's own test mapper builds it."""
    (resize,) = utils.build_augmentation(cfg, is_train=False)
    return resize


def predict_phrases(
    model, image_bgr_or_rgb: np.ndarray, phrases: Sequence[str], input_format: str, mapper_aug=None
) -> Tuple[List[str], np.ndarray, np.ndarray]:
    """Top-1 box and score of each phrase in one image (``PhraseRCNN``, eval mode, no gradient).

    Args:
        model: a ``PhraseRCNN`` (put in eval mode for the call, its mode restored afterwards).
        image_bgr_or_rgb: H x W x 3 uint8 image whose channel order is ``input_format``; converted
            to the model's ``input_format`` when they differ (``DefaultPredictor`` does the same).
        phrases: raw phrases; each is normalized with :func:`phrasedet.text.normalize_phrase`.
        input_format: ``"RGB"`` or ``"BGR"``, the order of ``image_bgr_or_rgb`` (usually
            ``cfg.INPUT.FORMAT``, the image read with ``detection_utils.read_image(..., format)``).
        mapper_aug: the test-time resize: a Detectron2 ``Augmentation``, or a config from which
            :func:`build_test_resize` builds it (``ResizeShortestEdge`` from
            ``INPUT.MIN_SIZE_TEST``/``MAX_SIZE_TEST``); ``None`` scores the image at its own size.

    Returns:
        (normalized phrases [P], boxes float32 [P, 4] xyxy in the given image's coordinates,
        scores float32 [P]). A phrase without any detection (no proposal) gets a NaN score and box.
    """
    raw = [phrases] if isinstance(phrases, str) else list(phrases)
    if not raw:
        raise ValueError("no phrases given")
    normalized = [normalize_phrase(p) for p in raw]
    empty = [r for r, n in zip(raw, normalized) if not n]
    if empty:
        raise ValueError(f"phrases with no words left after normalization: {empty}")
    image = np.asarray(image_bgr_or_rgb)
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"expected an H x W x 3 image, got shape {image.shape}")
    model_format = getattr(model, "input_format", input_format)
    if {input_format, model_format} == {"RGB", "BGR"}:
        image = image[:, :, ::-1]
    elif input_format != model_format:
        raise ValueError(f"cannot convert an image in {input_format!r} to the model's {model_format!r}")
    height, width = image.shape[:2]
    if mapper_aug is not None and not isinstance(mapper_aug, (T.Augmentation, T.Transform)):
        mapper_aug = build_test_resize(mapper_aug)
    if isinstance(mapper_aug, T.Augmentation):
        image = mapper_aug.get_transform(image).apply_image(image)
    elif isinstance(mapper_aug, T.Transform):
        image = mapper_aug.apply_image(image)
    inputs = {
        "image": torch.as_tensor(np.ascontiguousarray(image.transpose(2, 0, 1))),
        "height": height,
        "width": width,
        "phrases": normalized,
    }
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model([inputs])[0]
    finally:
        model.train(was_training)
    scores, boxes = out["scores"].cpu(), out["boxes"].cpu()
    P = len(normalized)
    if scores.numel() == 0 or scores.shape[1] == 0:
        top_scores = np.full((P,), np.nan, dtype=np.float32)
        top_boxes = np.full((P, 4), np.nan, dtype=np.float32)
    else:
        top_scores = scores[:, 0].numpy().astype(np.float32)
        top_boxes = boxes[:, 0].numpy().astype(np.float32)
    return list(out["phrases"]), top_boxes, top_scores


def _image_phrases(dataset_dict, max_phrases=MAX_PHRASES_PER_IMAGE):
    """First ``max_phrases`` distinct phrases of an image and, per phrase, its distinct gt boxes."""
    by_phrase = {}
    for ann in dataset_dict.get("annotations", ()):
        boxes = by_phrase.setdefault(ann["phrase"], [])
        box = [float(v) for v in ann["bbox"]]
        if box not in boxes:
            boxes.append(box)
    phrases = list(by_phrase)[:max_phrases]
    return phrases, [np.asarray(by_phrase[p], dtype=np.float64).reshape(-1, 4) for p in phrases]


def save_test_visualizations(cfg, model, dataset_name: str, output_dir: str, num_images: int = 4, min_size: int = 512) -> List[str]:
    """Detections of each image's own ground-truth phrases on the first images of a dataset.

    For each of the first ``num_images`` images of ``dataset_name`` (``DatasetCatalog`` order), the
    model is asked about the image's distinct ground-truth phrases (at most 6, in annotation order);
    the top-1 detection of each and its ground-truth (union) boxes, dashed, are drawn and saved as
    ``<output_dir>/<image_id>.png``.

    Returns:
        the paths of the PNG files written, in dataset order.
    """
    os.makedirs(output_dir, exist_ok=True)
    aug = build_test_resize(cfg)
    paths = []
    for d in DatasetCatalog.get(dataset_name)[: max(int(num_images), 0)]:
        image = utils.read_image(d["file_name"], format=cfg.INPUT.FORMAT)
        phrases, gt = _image_phrases(d)
        if phrases:
            phrases, boxes, scores = predict_phrases(model, image, phrases, cfg.INPUT.FORMAT, aug)
        else:
            boxes, scores = np.zeros((0, 4)), np.zeros((0,))
        drawn = draw_phrase_detections(
            utils.convert_image_to_rgb(image, cfg.INPUT.FORMAT), phrases, boxes, scores, gt, min_size=min_size
        )
        name = str(d.get("image_id", os.path.splitext(os.path.basename(d["file_name"]))[0]))
        path = os.path.join(output_dir, name.replace(os.sep, "_") + ".png")
        Image.fromarray(drawn).save(path)
        paths.append(path)
    return paths
