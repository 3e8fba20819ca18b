"""``add_pointing_config``: the pointing game (paper 004's DSVE-loc): ``MODEL.POINTING``,
``INPUT.POINTING``, ``TEST.POINTING``. DSVE-loc's embedding itself (adaptation, WELDON pooling,
SRU, loss) is configured by ``MODEL.RETRIEVAL``, shared with the retrieval family."""
from detectron2.config import CfgNode as CN

__all__ = ["add_pointing_config"]


def add_pointing_config(cfg):
    """Keys of DSVE-loc's heatmaps, the pointing mapper and the pointing-game evaluator."""
    _C = cfg
    _C.MODEL.POINTING = CN()
    # Coordinates of the text embedding whose maps are summed into the heatmap (paper 004: 180 of 2,400, i.e. 7.5 % of EMBED_DIM).
    _C.MODEL.POINTING.HEATMAP_TOPK = 180
    # Which coordinates: "value" (the k largest entries, the released code) or "magnitude" (the k largest |entries|).
    _C.MODEL.POINTING.TOPK_SELECT = "value"
    # The point of a heatmap: "corner" (argmax cell of the coarse map at its top-left corner, the released code), "centre" (its centre) or "upsampled" (argmax of the map resized to the image).
    _C.MODEL.POINTING.POINT_MODE = "corner"

    _C.INPUT.POINTING = CN()
    # Pointing-game images are resized whole to SIZE x SIZE regardless of aspect ratio ("square", the released code: 416) or with their shorter side to SIZE ("shorter_side").
    _C.INPUT.POINTING.RESIZE_MODE = "square"
    # See RESIZE_MODE.
    _C.INPUT.POINTING.SIZE = 416

    _C.TEST.POINTING = CN()
    # Hit rule of the reported accuracy: "strict" (inside, the released code), "inclusive" (inside or on the edge) or "tolerance" (within TOLERANCE pixels of the box); every rule is reported too.
    _C.TEST.POINTING.HIT_RULE = "strict"
    # Pixels (of the original image) of the "tolerance" rule (other pointing-game code: 15).
    _C.TEST.POINTING.TOLERANCE = 15.0
    # Test images per batch (images of one batch must have one size: RESIZE_MODE "square").
    _C.TEST.POINTING.IMS_PER_BATCH = 1
    # Save every query's point and hits to <OUTPUT_DIR>/inference/<dataset>/ for tools/evaluation/evaluate_pointing.py.
    _C.TEST.POINTING.SAVE_PREDICTIONS = True
    # Heatmap pictures (image, heatmap, point, ground-truth box) saved after evaluation, for the first N queries.
    _C.TEST.POINTING.NUM_VISUALIZE = 4
