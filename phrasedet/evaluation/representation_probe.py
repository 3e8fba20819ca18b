"""How well a frozen image representation sees what the built-in captions state: a linear probe.

For every binary fact label (:mod:`phrasedet.data.synthetic.labels`: background, colour, shape,
colour + shape, count, colour or shape at a position), a logistic regression is fitted on the
training images' features (standardized with the training mean and deviation) and scores the
test images; the probe reports the test ROC AUC of each label and the mean per group. A label
is probed only where the training images hold at least :data:`MIN_EXAMPLES` positives and as
many negatives and the test images at least one of each (otherwise its AUC is undefined or
meaningless); the others are counted as skipped, never dropped silently.

An AUC of 1 means the fact can be read off the representation by a linear layer on every test
image; 0.5 is chance. The retrieval and pointing models put a linear projection on the same
pooled features, so a fact the probe cannot read is one their losses cannot use.
"""
from typing import Dict, Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

__all__ = ["MIN_EXAMPLES", "TRAIN_SPLIT", "TEST_SPLIT", "probe_labels", "probe_groups", "format_probe",
           "builtin_split_labels", "probe_features_dir"]

TRAIN_SPLIT, TEST_SPLIT = "builtin_flickr30k_captions_train", "builtin_flickr30k_captions_test"

#: Fewest training positives (and negatives) for a label to be probed.
MIN_EXAMPLES = 5


def _standardize(train: np.ndarray, test: np.ndarray) -> tuple:
    mean, std = train.mean(0), train.std(0)
    std[std == 0] = 1.0
    return (train - mean) / std, (test - mean) / std


def probe_labels(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray,
                 c: float = 1.0) -> np.ndarray:
    """The test AUC of one logistic regression per label column.

    Args:
        train_x: [N, F] features of the training images; test_x: [M, F].
        train_y: [N, L] 0/1 labels; test_y: [M, L].
        c: inverse L2 regularization strength (scikit-learn's ``C``).

    Returns:
        [L] float64: each label's test AUC, NaN for a label skipped (see the module docstring).

    Raises:
        ValueError: for mismatched shapes or features that are not finite.
    """
    train_x, test_x = np.asarray(train_x, np.float64), np.asarray(test_x, np.float64)
    train_y, test_y = np.asarray(train_y), np.asarray(test_y)
    if train_x.ndim != 2 or test_x.ndim != 2 or train_x.shape[1] != test_x.shape[1]:
        raise ValueError(f"features must be [N, F] and [M, F], got {train_x.shape} and {test_x.shape}")
    if train_y.shape != (len(train_x), test_y.shape[1]) or len(test_y) != len(test_x):
        raise ValueError(f"labels {train_y.shape} / {test_y.shape} do not match features {train_x.shape} / {test_x.shape}")
    for what, x in (("training", train_x), ("test", test_x)):
        if not np.isfinite(x).all():
            raise ValueError(f"the {what} features hold {int((~np.isfinite(x)).sum())} values that are not finite")
    train_x, test_x = _standardize(train_x, test_x)
    out = np.full(train_y.shape[1], np.nan)
    for j in range(train_y.shape[1]):
        pos, neg = int(train_y[:, j].sum()), int(len(train_y) - train_y[:, j].sum())
        if min(pos, neg) < MIN_EXAMPLES or len(set(test_y[:, j].tolist())) < 2:
            continue
        model = LogisticRegression(C=c, max_iter=5000)
        model.fit(train_x, train_y[:, j])
        out[j] = roc_auc_score(test_y[:, j], model.decision_function(test_x))
    return out


def probe_groups(aucs: np.ndarray, groups: Sequence[str]) -> Dict[str, dict]:
    """Per group (in first-seen order): ``{"auc": mean AUC of its probed labels, "labels": probed,
    "skipped": skipped}`` (``auc`` NaN when none was probed)."""
    aucs, groups = np.asarray(aucs, np.float64), list(groups)
    out = {}
    for g in dict.fromkeys(groups):
        values = aucs[[i for i, x in enumerate(groups) if x == g]]
        probed = values[~np.isnan(values)]
        out[g] = {"auc": float(probed.mean()) if probed.size else float("nan"), "labels": int(probed.size),
                  "skipped": int(values.size - probed.size)}
    return out


def format_probe(columns: Dict[str, Dict[str, dict]]) -> str:
    """A markdown table: one row per group, one column per representation ({name: probe_groups})."""
    names = list(columns)
    groups = list(dict.fromkeys(g for c in columns.values() for g in c))
    lines = ["| fact group (labels probed / skipped) | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for g in groups:
        first = next(c[g] for c in columns.values() if g in c)
        cells = [f"{c[g]['auc']:.3f}" if g in c else "-" for c in columns.values()]
        lines.append(f"| {g} ({first['labels']} / {first['skipped']}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def builtin_split_labels(dataset: str, images: dict, groups=None) -> tuple:
    """(image ids in the registered split's record order, [N, L] labels) of a built-in split;
    ``images`` is the ground truth's (:func:`phrasedet.data.synthetic.ground_truth.load_ground_truth`)."""
    from detectron2.data import DatasetCatalog

    from phrasedet.data.synthetic.labels import LABEL_GROUPS, label_matrix

    ids = [str(r["image_id"]) for r in DatasetCatalog.get(dataset)]
    missing = [i for i in ids if i not in images]
    if missing:
        raise KeyError(f"{dataset}: image {missing[0]!r} is not in the built-in ground truth ({len(missing)} missing)")
    return ids, label_matrix([images[i] for i in ids], groups or LABEL_GROUPS)


def _pooled_rows(features_dir: str, dataset: str) -> np.ndarray:
    """[N, F] rows of ``<features_dir>/<dataset>.npy``, checked against the split; maps [N, C, h, w]
    are average-pooled (what an average-pooling model sees)."""
    from detectron2.data import DatasetCatalog

    from phrasedet.data.image_features import attach_image_features, read_feature_row

    records = attach_image_features(DatasetCatalog.get(dataset), dataset, features_dir)
    rows = [read_feature_row(r["feature_file"], r["feature_row"]) for r in records]
    rows = [x.reshape(x.shape[0], -1).mean(1) if x.ndim == 3 else x for x in rows]
    return np.stack(rows)


def probe_features_dir(features_dir: str, images: dict, train: str = TRAIN_SPLIT, test: str = TEST_SPLIT,
                       c: float = 1.0) -> dict:
    """The probe of the features of the built-in ``train`` and ``test`` splits in ``features_dir``
    (the layout of :mod:`phrasedet.data.image_features`), every label group:
    ``{"groups": probe_groups(...), "labels": {label name: test AUC or None where skipped}}``."""
    from phrasedet.data.synthetic.labels import label_groups, label_names

    _, train_y = builtin_split_labels(train, images)
    _, test_y = builtin_split_labels(test, images)
    aucs = probe_labels(_pooled_rows(features_dir, train), train_y, _pooled_rows(features_dir, test), test_y, c)
    return {"groups": probe_groups(aucs, label_groups()),
            "labels": {n: None if np.isnan(a) else float(a) for n, a in zip(label_names(), aucs)}}
