"""``add_pretraining_config``: the built-in stand-in for ImageNet pretraining: ``MODEL.CLASSIFIER``
(``MultiLabelImageClassifier``), ``INPUT.PRETRAINING`` and ``PHRASEDET.PRETRAINING`` (the
pretraining split's labels and the cached CNN)."""
from detectron2.config import CfgNode as CN

__all__ = ["add_pretraining_config"]


def add_pretraining_config(cfg):
    """Keys of the multi-label classifier, its mapper and the pretraining split."""
    _C = cfg
    _C.MODEL.CLASSIFIER = CN()
    # Backbone output that is average-pooled and classified (the one the retrieval and pointing configs use).
    _C.MODEL.CLASSIFIER.FEATURE = "res4"
    # Number of labels: that of PHRASEDET.PRETRAINING.LABEL_GROUPS (131 for the default groups; a mismatch is an error).
    _C.MODEL.CLASSIFIER.NUM_LABELS = 131
    # Weight of each label group's labels in the loss (the binary cross-entropy of label j weighted by its group's weight,
    # over the sum of the weights). With equal weights the 6 shape labels weigh 6/131 and the network learns colours, not
    # shapes (docs/DECISIONS.md); configs/pretraining/ weighs shape labels 10 times.
    _C.MODEL.CLASSIFIER.GROUP_WEIGHTS = CN()
    for group in ("BACKGROUND", "COLOUR", "SHAPE", "COLOUR_SHAPE", "COUNT", "COLOUR_POSITION", "SHAPE_POSITION"):
        setattr(_C.MODEL.CLASSIFIER.GROUP_WEIGHTS, group, 1.0)

    _C.INPUT.PRETRAINING = CN()
    # Images are resized to SIZE x SIZE, as INPUT.RETRIEVAL / INPUT.POINTING RESIZE_MODE "square" resize the benchmark's.
    _C.INPUT.PRETRAINING.SIZE = 128
    # Flip training images left-right at random (the labels say nothing of positions).
    _C.INPUT.PRETRAINING.RANDOM_FLIP = False

    _C.PHRASEDET.PRETRAINING = CN()
    # Label groups of phrasedet/data/synthetic/labels.py the classifier learns (its columns, in this order).
    _C.PHRASEDET.PRETRAINING.LABEL_GROUPS = ["background", "colour", "shape", "colour_shape", "count"]
