#!/usr/bin/env python
"""Heatmaps of any texts in one image with a trained DSVE-loc model (paper 004), one picture per text.

    python tools/evaluation/visualize_heatmap.py --config-file configs/pointing/dsve_loc.yaml \\
        --weights output/pointing/dsve_loc/model_final.pth --image ~/.cache/phrasedet/builtin-v3-seed0/flickr30k-images/100443358.jpg \\
        --texts "the purple cross" "a small green cross" [--box X1 Y1 X2 Y2] \\
        --output-dir heatmaps/ [KEY VALUE ...]

Each text's heatmap (``MODEL.POINTING``: k, top-k selection, point mode) is drawn over the image
with its point (red) and, with ``--box``, a ground-truth box (green); the point of each text is
printed in the image's pixels. Any text works, with words never seen in training too (they need
a word vector). Trailing ``KEY VALUE`` pairs override the config.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from visualize_phrases import _CONFIG_KEY, load_image_and_model  # noqa: E402  (the same config and model handling)


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config-file", required=True, metavar="FILE", help="a DSVE-loc config (configs/pointing/)")
    parser.add_argument("--weights", default="", help="checkpoint to load (default: the config's MODEL.WEIGHTS)")
    parser.add_argument("--image", required=True, metavar="PATH", help="image file")
    parser.add_argument("--texts", nargs="*", default=[], metavar="TEXT", help="texts to localize (quote each)")
    parser.add_argument("--box", nargs=4, type=float, default=None, metavar=("X1", "Y1", "X2", "Y2"),
                        help="a ground-truth box to draw, in the image's pixels")
    parser.add_argument("--output-dir", default="heatmaps", metavar="DIR", help="where the pictures go")
    parser.add_argument("opts", nargs=argparse.REMAINDER, metavar="KEY VALUE", help="config overrides")
    return parser


def _check_args(parser, args):
    for i, text in enumerate(args.texts):  # overrides typed right after the texts
        if _CONFIG_KEY.match(text):
            args.opts, args.texts = args.texts[i:] + list(args.opts), args.texts[:i]
            break
    for path, what in ((args.config_file, "config file"), (args.image, "image file")):
        if not os.path.isfile(path):
            parser.error(f"{what} not found: {path}")
    texts = [t for t in args.texts if t.strip()]
    if not texts:
        parser.error('no texts given: pass at least one, e.g. --texts "a red cross"')
    if args.weights and not os.path.isfile(args.weights):
        parser.error(f"weights file not found: {args.weights}")
    if len(args.opts) % 2:
        parser.error(f"config overrides must be KEY VALUE pairs, got {args.opts}")
    return texts


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    texts = _check_args(parser, args)

    from detectron2.data import detection_utils as utils
    from PIL import Image

    from phrasedet.utils import draw_heatmap, pointing_heatmaps

    cfg, image, model = load_image_and_model(parser, args)
    if not hasattr(model, "heatmaps"):
        parser.error(f"{cfg.MODEL.META_ARCHITECTURE} makes no heatmaps: use a DSVE-loc config (configs/pointing/)")
    record = {"file_name": args.image, "height": image.shape[0], "width": image.shape[1]}
    heatmaps, points = pointing_heatmaps(model, cfg, record, texts)
    os.makedirs(args.output_dir, exist_ok=True)
    rgb = utils.convert_image_to_rgb(image, cfg.INPUT.FORMAT)
    for k, (text, heatmap, point) in enumerate(zip(texts, heatmaps, points)):
        path = os.path.join(args.output_dir, f"heatmap_{k}.png")
        Image.fromarray(draw_heatmap(rgb, heatmap, point, args.box, text)).save(path)
        print(f"{text!r}: point ({point[0]:.1f}, {point[1]:.1f}), heatmap {heatmap.shape[0]}x{heatmap.shape[1]} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
