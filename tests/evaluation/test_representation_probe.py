"""The linear probe of an image representation (phrasedet/evaluation/representation_probe.py and
tools/evaluation/probe_representation.py), on hand-made features whose answer is known."""
import json

import numpy as np
import pytest

from phrasedet.data.image_features import write_image_features
from phrasedet.evaluation.representation_probe import (TEST_SPLIT, TRAIN_SPLIT, builtin_split_labels, format_probe,
                                                       probe_groups, probe_labels)
from ..tool_runs import run_tool



def _labels(rng, n, p):
    return (rng.random((n, len(p))) < p).astype(np.uint8)


def test_a_feature_that_is_the_label_is_read_perfectly_and_noise_is_not():
    rng = np.random.default_rng(0)
    p = np.array([0.3, 0.5, 0.2])
    ytr, yte = _labels(rng, 400, p), _labels(rng, 200, p)
    xtr = np.hstack([ytr[:, :1] + 0.1 * rng.normal(size=(400, 1)), rng.normal(size=(400, 5))])
    xte = np.hstack([yte[:, :1] + 0.1 * rng.normal(size=(200, 1)), rng.normal(size=(200, 5))])
    auc = probe_labels(xtr, ytr, xte, yte)
    assert auc[0] == 1.0 and abs(auc[1] - 0.5) < 0.1 and abs(auc[2] - 0.5) < 0.1


def test_a_label_with_fewer_than_min_examples_negatives_in_training_is_skipped_as_one_with_few_positives():
    """16 of 20 training images positive: 4 negatives, fewer than MIN_EXAMPLES (5); 15 positive:
    5 negatives, probed. The test split holds both classes for each."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(20, 3))
    y = np.zeros((20, 2), np.uint8)
    y[:16, 0] = 1
    y[:15, 1] = 1
    yte = np.array([[1, 1], [0, 0], [1, 1], [0, 0]], np.uint8)
    auc = probe_labels(x, y, x[:4], yte)
    assert np.isnan(auc[0]) and 0.0 <= auc[1] <= 1.0


def test_each_label_is_fit_to_convergence_where_scikit_learn_s_default_100_iterations_stop_short():
    """Low-rank features with little noise and almost no regularization (C = 1e6): lbfgs needs a few
    hundred iterations, more than scikit-learn's default of 100, which warns and stops early. The
    probe warns of nothing and gives the AUC of a fit run to convergence by hand."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    from phrasedet.evaluation.representation_probe import _standardize

    rng = np.random.default_rng(1)
    z = rng.normal(size=(900, 8))
    x = z @ rng.normal(size=(8, 64)) + 0.1 * rng.normal(size=(900, 64))
    y = (z[:, :1] + 0.2 * rng.normal(size=(900, 1)) > 0.8).astype(np.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        auc = probe_labels(x[:600], y[:600], x[600:], y[600:], c=1e6)
    train_x, test_x = _standardize(x[:600], x[600:])
    model = LogisticRegression(C=1e6, max_iter=100_000).fit(train_x, y[:600, 0])
    assert model.n_iter_[0] > 100  # the case this test is for
    assert auc[0] == pytest.approx(roc_auc_score(y[600:, 0], model.decision_function(test_x)), abs=1e-6)


def test_the_auc_by_hand():
    """One feature, no noise: the probe's ranking is the feature's, so the AUC is the feature's
    own: positives 0.35 and 0.8 against negatives 0.1 and 0.4 win 3 of 4 pairs."""
    xtr = np.array([[0.0]] * 5 + [[1.0]] * 5)
    ytr = np.array([[0]] * 5 + [[1]] * 5)
    assert probe_labels(xtr, ytr, np.array([[0.1], [0.4], [0.35], [0.8]]), np.array([[0], [0], [1], [1]]))[0] == 0.75


def test_labels_too_rare_to_probe_are_skipped_and_counted():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(20, 3))
    y = np.zeros((20, 3), np.uint8)
    y[:4, 0] = 1            # 4 training positives: fewer than MIN_EXAMPLES
    y[:10, 1] = 1           # fine in training ...
    y[:10, 2] = 1
    yte = np.zeros((6, 3), np.uint8)
    yte[:, 1] = 1           # ... but every test image positive: no AUC
    yte[:3, 2] = 1
    auc = probe_labels(x, y, x[:6], yte)
    assert np.isnan(auc[0]) and np.isnan(auc[1]) and not np.isnan(auc[2])
    groups = probe_groups(auc, ["a", "b", "b"])
    assert groups["a"] == {"auc": pytest.approx(float("nan"), nan_ok=True), "labels": 0, "skipped": 1}
    assert groups["b"] == {"auc": auc[2], "labels": 1, "skipped": 1}


@pytest.mark.parametrize("args, message", [
    ((np.zeros((4, 2)), np.zeros((4, 1)), np.zeros((3, 3)), np.zeros((3, 1))),
     r"^features must be \[N, F\] and \[M, F\], got \(4, 2\) and \(3, 3\)$"),
    ((np.zeros((4, 2)), np.zeros((5, 1)), np.zeros((3, 2)), np.zeros((3, 1))),
     r"^labels \(5, 1\) / \(3, 1\) do not match features \(4, 2\) / \(3, 2\)$"),
    ((np.array([[0.0, np.inf]] * 4), np.zeros((4, 1)), np.zeros((3, 2)), np.zeros((3, 1))),
     r"^the training features hold 4 values that are not finite$"),
    ((np.zeros((4, 2, 1)), np.zeros((4, 1)), np.zeros((3, 2)), np.zeros((3, 1))),
     r"^features must be \[N, F\] and \[M, F\], got \(4, 2, 1\) and \(3, 2\)$"),
    ((np.zeros((4, 2)), np.zeros((4, 1)), np.array([[0.0, 1.0], [np.nan, 0.0], [2.0, 3.0]]), np.zeros((3, 1))),
     r"^the test features hold 1 values that are not finite$"),
])
def test_bad_inputs(args, message):
    with pytest.raises(ValueError, match=message):
        probe_labels(*args)


def test_the_table():
    table = format_probe({"cnn": {"shape": {"auc": 0.6234, "labels": 6, "skipped": 0}},
                          "oracle": {"shape": {"auc": 1.0, "labels": 6, "skipped": 0}}})
    assert table.splitlines() == ["| fact group (labels probed / skipped) | cnn | oracle |", "|---|---|---|",
                                  "| shape (6 / 0) | 0.623 | 1.000 |"]


@pytest.mark.usefixtures("builtin_root")
def test_the_tool_reads_a_features_folder_whose_answer_is_known(tmp_path):
    """Features that are the colour and shape labels plus noise: colour and shape are read
    perfectly, the colour-position facts only as far as colours alone tell them."""
    import phrasedet  # noqa: F401
    from phrasedet.data.datasets.builtin import builtin_dataset_root
    from phrasedet.data.synthetic.ground_truth import load_ground_truth
    from phrasedet.data.synthetic.labels import label_matrix

    images = load_ground_truth(builtin_dataset_root())
    rng = np.random.default_rng(0)
    for split in (TRAIN_SPLIT, TEST_SPLIT):
        ids, _ = builtin_split_labels(split, images)
        known = label_matrix([images[i] for i in ids], ["colour", "shape"]).astype(np.float32)
        write_image_features(str(tmp_path / "f"), split, np.hstack([known, rng.normal(size=(len(ids), 4))]), ids)
    lines = run_tool("probe_representation.py", "--features", f"made={tmp_path / 'f'}", "--output-dir",
                     str(tmp_path / "out")).output.splitlines()
    assert lines[2] == "| fact group (labels probed / skipped) | made |"
    assert "| colour (8 / 0) | 1.000 |" in lines and "| shape (6 / 0) | 1.000 |" in lines
    probe = json.loads((tmp_path / "out" / "probe.json").read_text())["probes"]["made"]
    assert 0.6 < probe["groups"]["colour_position"]["auc"] < 0.95 and probe["labels"]["red"] == 1.0
    assert probe["labels"]["2+ purple star"] is None  # never twice in one training image: skipped


def test_the_tool_needs_something_to_probe(tmp_path):
    proc = run_tool("probe_representation.py", "--output-dir", str(tmp_path), check=False)
    assert proc.returncode != 0 and "nothing to probe: give --features, --weights, --oracle or --detector" in proc.output


@pytest.mark.usefixtures("builtin_root")
def test_a_features_folder_of_maps_is_average_pooled_and_probed_in_this_process(tmp_path):
    """Maps [N, 14, 2, 2] whose cells average to the colour and shape labels plus noise: the rows
    are their means, and the probe is probe_labels on those rows with the regularization given."""
    import phrasedet  # noqa: F401
    from phrasedet.data.datasets.builtin import builtin_dataset_root
    from phrasedet.data.synthetic.ground_truth import load_ground_truth
    from phrasedet.data.synthetic.labels import label_groups, label_matrix, label_names
    from phrasedet.evaluation.representation_probe import _pooled_rows, probe_features_dir

    images = load_ground_truth(builtin_dataset_root())
    rng = np.random.default_rng(0)
    means = {}
    for split in (TRAIN_SPLIT, TEST_SPLIT):
        ids, _ = builtin_split_labels(split, images)
        known = label_matrix([images[i] for i in ids], ["colour", "shape"]).astype(np.float32)
        means[split] = 0.3 * known + rng.normal(size=known.shape).astype(np.float32)
        spread = rng.normal(size=known.shape).astype(np.float32)
        maps = np.stack([means[split] + spread, means[split] - spread, means[split] + 2 * spread,
                         means[split] - 2 * spread], -1).reshape(len(ids), known.shape[1], 2, 2)
        write_image_features(str(tmp_path / "f"), split, maps, ids)
        np.testing.assert_allclose(_pooled_rows(str(tmp_path / "f"), split), maps.mean((2, 3)), rtol=0, atol=1e-6)
    got = probe_features_dir(str(tmp_path / "f"), images, c=0.05)
    _, train_y = builtin_split_labels(TRAIN_SPLIT, images)
    _, test_y = builtin_split_labels(TEST_SPLIT, images)
    aucs = probe_labels(means[TRAIN_SPLIT], train_y, means[TEST_SPLIT], test_y, 0.05)
    assert got["labels"] == {n: None if np.isnan(a) else pytest.approx(float(a), abs=1e-6) for n, a in zip(label_names(), aucs)}
    assert got["groups"] == probe_groups(aucs, label_groups())
    assert 0.5 < got["groups"]["shape"]["auc"] < 0.9 and got["labels"]["2+ purple star"] is None  # neither chance nor perfect
    default = probe_features_dir(str(tmp_path / "f"), images)
    assert default == probe_features_dir(str(tmp_path / "f"), images, c=1.0)  # the default regularization is 1
    assert default["labels"] != got["labels"] != probe_features_dir(str(tmp_path / "f"), images, c=2.0)["labels"]


def test_standardization_by_hand_uses_the_training_mean_and_std_and_leaves_constant_columns_alone():
    from phrasedet.evaluation.representation_probe import _standardize

    train, test = _standardize(np.array([[1.0, 5.0], [5.0, 5.0]]), np.array([[4.0, 7.0]]))
    assert train.tolist() == [[-1.0, 0.0], [1.0, 0.0]] and test.tolist() == [[0.5, 2.0]]  # mean (3, 5), std (2, 0 -> 1)


def test_the_default_regularization_is_one_and_changes_the_answer():
    rng = np.random.default_rng(3)
    y = _labels(rng, 300, np.array([0.4]))
    x = y + 2.0 * rng.normal(size=(300, 6))
    default = probe_labels(x[:200], y[:200], x[200:], y[200:])
    assert default[0] == probe_labels(x[:200], y[:200], x[200:], y[200:], 1.0)[0]
    assert default[0] != probe_labels(x[:200], y[:200], x[200:], y[200:], 0.001)[0]


def test_groups_read_none_as_skipped_and_warn_about_nothing():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "mean of empty slice" for a group with nothing probed
        groups = probe_groups([0.75, None, float("nan")], ["a", "a", "b"])
    assert groups["a"] == {"auc": 0.75, "labels": 1, "skipped": 1}
    assert np.isnan(groups["b"]["auc"]) and groups["b"]["labels"] == 0 and groups["b"]["skipped"] == 1


def test_a_column_without_a_group_shows_a_dash():
    table = format_probe({"cnn": {"shape": {"auc": 0.5, "labels": 6, "skipped": 0}},
                          "oracle": {"shape": {"auc": 1.0, "labels": 6, "skipped": 0},
                                     "size": {"auc": 0.9, "labels": 1, "skipped": 0}}})
    assert table.splitlines()[2:] == ["| shape (6 / 0) | 0.500 | 1.000 |", "| size (1 / 0) | - | 0.900 |"]



@pytest.mark.usefixtures("builtin_root")
def test_a_split_s_labels_follow_its_records_and_the_groups_asked_and_missing_images_are_counted():
    import phrasedet  # noqa: F401
    from detectron2.data import DatasetCatalog

    from phrasedet.data.datasets.builtin import builtin_dataset_root
    from phrasedet.data.synthetic.ground_truth import load_ground_truth
    from phrasedet.data.synthetic.labels import label_matrix

    images = load_ground_truth(builtin_dataset_root())
    ids, labels = builtin_split_labels(TEST_SPLIT, images, ["colour"])
    assert ids == [str(r["image_id"]) for r in DatasetCatalog.get(TEST_SPLIT)]
    assert labels.tolist() == label_matrix([images[i] for i in ids], ["colour"]).tolist()
    assert builtin_split_labels(TEST_SPLIT, images)[1].tolist() == label_matrix([images[i] for i in ids]).tolist()
    partial = {k: v for k, v in images.items() if k not in (ids[3], ids[5])}
    with pytest.raises(KeyError) as error:
        builtin_split_labels(TEST_SPLIT, partial)
    assert error.value.args == (f"{TEST_SPLIT}: image {ids[3]!r} is not in the built-in ground truth (2 missing)",)
