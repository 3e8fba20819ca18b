#!/usr/bin/env python
"""Detect phrases in one image with a trained PhraseRCNN and save a picture of the detections.

    python tools/evaluation/visualize_phrases.py --config-file configs/qa_rcnn.yaml \\
        --weights output/cite_cca/stage1_detector/model_final.pth --image ~/.cache/phrasedet/builtin-v3-seed0/flickr30k-images/100443358.jpg \\
        --phrases "the purple cross" "a small green cross" --output out.png [KEY VALUE ...]

Each phrase is normalized (``phrasedet.text.normalize_phrase``) and scored; its top-1 box and
score are printed and drawn (upscaled for small images, ``--min-size``). Trailing ``KEY VALUE``
pairs override the config, e.g. ``MODEL.DEVICE cpu``.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config-file", required=True, metavar="FILE", help="phrasedet config (yaml)")
    parser.add_argument("--weights", default="", help="checkpoint to load (default: the config's MODEL.WEIGHTS)")
    parser.add_argument("--image", required=True, metavar="PATH", help="image file to detect phrases in")
    parser.add_argument("--phrases", nargs="*", default=[], metavar="PHRASE", help="phrases to detect (quote each)")
    parser.add_argument("--output", default="phrase_detections.png", metavar="PNG", help="where to save the drawing")
    parser.add_argument("--min-size", type=int, default=512, help="upscale so the shorter side is at least this")
    parser.add_argument("opts", nargs=argparse.REMAINDER, metavar="KEY VALUE", help="config overrides")
    return parser


_CONFIG_KEY = re.compile(r"^[A-Z][A-Z0-9_]*(\.[A-Z0-9_]+)+$")


def _split_overrides(args):
    """Config overrides typed right after the phrases (``--phrases a b MODEL.DEVICE cpu``) go to opts."""
    for i, p in enumerate(args.phrases):
        if _CONFIG_KEY.match(p):
            args.opts = args.phrases[i:] + list(args.opts)
            args.phrases = args.phrases[:i]
            break


def _check_args(parser, args):
    """Fail fast, before building the model, with a message naming what is wrong."""
    _split_overrides(args)
    if not os.path.isfile(args.config_file):
        parser.error(f"config file not found: {args.config_file}")
    if not os.path.isfile(args.image):
        parser.error(f"image file not found: {args.image}")
    phrases = [p for p in args.phrases if p.strip()]
    if not phrases:
        parser.error('no phrases given: pass at least one, e.g. --phrases "a red circle" "the blue square"')
    from phrasedet.text import normalize_phrase

    empty = [p for p in phrases if not normalize_phrase(p)]
    if empty:
        parser.error(f"no words left in these phrases after normalization: {empty}")
    if args.weights and "://" not in args.weights and not os.path.isfile(args.weights):
        parser.error(f"weights file not found: {args.weights}")
    if len(args.opts) % 2:
        parser.error(f"config overrides must be KEY VALUE pairs, got {args.opts}")
    return phrases


def setup_cfg(args):
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    if args.weights:
        cfg.MODEL.WEIGHTS = args.weights
    cfg.freeze()
    return cfg


def load_image_and_model(parser, args):
    """(cfg, the image of ``args.image`` in ``INPUT.FORMAT``, the model with ``args.weights`` or
    ``MODEL.WEIGHTS`` loaded, in eval mode); an unreadable image is a parser error naming it."""
    from detectron2.data import detection_utils as utils
    from detectron2.modeling import build_model

    import phrasedet  # noqa: F401  (registers the meta-architectures and the datasets)
    from phrasedet.modeling.checkpoint import PhrasedetCheckpointer

    cfg = setup_cfg(args)
    try:
        image = utils.read_image(args.image, format=cfg.INPUT.FORMAT)
    except Exception as e:  # PIL's errors do not always name the file
        parser.error(f"cannot read image {args.image}: {e}")
    model = build_model(cfg)
    if cfg.MODEL.WEIGHTS:
        PhrasedetCheckpointer.from_config(cfg, model).load(cfg.MODEL.WEIGHTS)
    else:
        print("warning: no weights given (--weights or MODEL.WEIGHTS): the model is randomly initialized", file=sys.stderr)
    return cfg, image, model.eval()


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    phrases = _check_args(parser, args)

    import numpy as np
    from detectron2.data import detection_utils as utils
    from PIL import Image

    from phrasedet.utils import build_test_resize, draw_phrase_detections, predict_phrases

    cfg, image, model = load_image_and_model(parser, args)

    normalized, boxes, scores = predict_phrases(model, image, phrases, cfg.INPUT.FORMAT, build_test_resize(cfg))
    drawn = draw_phrase_detections(
        utils.convert_image_to_rgb(image, cfg.INPUT.FORMAT), normalized, boxes, scores, min_size=args.min_size
    )
    out_dir = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(out_dir, exist_ok=True)
    Image.fromarray(drawn).save(args.output)

    width = max(len(p) for p in phrases)
    print(f"{'phrase':<{width}}  {'normalized':<{max(len(n) for n in normalized)}}  score   box (x1, y1, x2, y2)")
    for raw, norm, box, score in zip(phrases, normalized, boxes, scores):
        box_text = "none" if not np.all(np.isfinite(box)) else "(" + ", ".join(f"{v:.1f}" for v in box) + ")"
        print(f"{raw:<{width}}  {norm:<{max(len(n) for n in normalized)}}  {score:.3f}  {box_text}")
    print(f"saved {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
