"""phrasedet/engine/comparison/protocol.py: oracle_features writes the oracle's features whenever they
are not all there, or not asked to be kept (--resume), and keeps them only when both hold."""
import os

import numpy as np
import pytest

from phrasedet.data.synthetic.ground_truth import SPLITS
from phrasedet.engine.comparison.protocol import oracle_features

NAMES = [f"builtin_flickr30k_captions_{s}" for s in SPLITS] + [f"builtin_flickr30k_pointing_{s}" for s in ("val", "test")]
GRID = 2  # small maps: the rule, not the oracle, is under test here


def _files(root):
    return [os.path.join(root, "features", kind, f"{n}.npy") for kind in ("global", "maps") for n in NAMES]


@pytest.mark.usefixtures("builtin_root")
def test_the_oracle_features_are_written_when_missing_rewritten_unless_kept_and_kept_with_resume(tmp_path):
    dirs = oracle_features(str(tmp_path / "a"), resume=True, grid=GRID)  # --resume with nothing there: written
    assert all(os.path.isfile(f) for f in _files(tmp_path / "a"))
    assert dirs == {"global": str(tmp_path / "a" / "features" / "global"), "maps": str(tmp_path / "a" / "features" / "maps")}
    fresh = {f: np.load(f) for f in _files(tmp_path / "a")}
    # stale features (another generator, another grid) without --resume: written again
    stale = _files(tmp_path / "a")[0]
    np.save(stale, np.zeros((3, 1), np.float32))
    oracle_features(str(tmp_path / "a"), resume=False, grid=GRID)
    assert np.array_equal(np.load(stale), fresh[stale])
    # --resume with one file gone: every file written again, the missing one included
    os.remove(_files(tmp_path / "a")[-1])
    np.save(stale, np.zeros((3, 1), np.float32))
    oracle_features(str(tmp_path / "a"), resume=True, grid=GRID)
    assert all(np.array_equal(np.load(f), v) for f, v in fresh.items())
    # --resume with every file there: kept as it is
    np.save(stale, np.zeros((3, 1), np.float32))
    oracle_features(str(tmp_path / "a"), resume=True, grid=GRID)
    assert np.load(stale).shape == (3, 1)


@pytest.mark.usefixtures("builtin_root")
def test_the_common_oracle_keeps_the_columns_that_more_than_five_training_images_have(tmp_path):
    from phrasedet.engine.comparison.protocol import common_oracle_features

    out = common_oracle_features(str(tmp_path), resume=False)
    full = os.path.join(tmp_path, "features", "global")
    train = np.load(os.path.join(full, f"{NAMES[0]}.npy"))
    keep = [j for j in range(train.shape[1]) if sum(1 for row in train if row[j] != 0) > 5]  # the slow count
    assert out == str(tmp_path / "features" / "common") and 0 < len(keep) < train.shape[1]
    for name in NAMES[:3]:  # the caption splits, rows and ids as the oracle's
        assert np.array_equal(np.load(os.path.join(out, f"{name}.npy")), np.load(os.path.join(full, f"{name}.npy"))[:, keep])
        with open(os.path.join(out, f"{name}.txt")) as a, open(os.path.join(full, f"{name}.txt")) as b:
            assert a.read() == b.read()
    np.save(os.path.join(out, f"{NAMES[1]}.npy"), np.zeros((3, 1), np.float32))
    common_oracle_features(str(tmp_path), resume=True)  # kept with --resume
    assert np.load(os.path.join(out, f"{NAMES[1]}.npy")).shape == (3, 1)
    common_oracle_features(str(tmp_path), resume=False)  # written again without
    assert np.load(os.path.join(out, f"{NAMES[1]}.npy")).shape == (60, len(keep))
    # a common file missing with --resume: made again from the oracle's features as kept, not recomputed
    np.save(os.path.join(full, f"{NAMES[2]}.npy"), np.zeros((4, train.shape[1]), np.float32))
    with open(os.path.join(full, f"{NAMES[2]}.txt"), "w") as f:
        f.write("a\nb\nc\nd\n")
    os.remove(os.path.join(out, f"{NAMES[2]}.npy"))
    common_oracle_features(str(tmp_path), resume=True)
    assert np.load(os.path.join(out, f"{NAMES[2]}.npy")).shape == (4, len(keep))


def test_the_common_oracle_of_the_long_tailed_language_has_its_splits_names(tmp_path):
    from phrasedet.data.datasets.builtin import builtin_name
    from phrasedet.data.synthetic import ensure_builtin_dataset
    from phrasedet.engine.comparison.protocol import common_oracle_features

    ensure_builtin_dataset(language="long_tail")
    out = common_oracle_features(str(tmp_path), resume=False, language="long_tail")
    assert sorted(os.listdir(out)) == sorted(f"{builtin_name(f'flickr30k_captions_{s}', 'long_tail')}.{e}"
                                             for s in ("train", "val", "test") for e in ("npy", "txt"))


def test_the_oracle_features_are_those_of_the_language_s_splits_on_a_grid_of_16(tmp_path, monkeypatch):
    import phrasedet.data.synthetic.oracle as oracle
    from phrasedet.data.datasets.builtin import builtin_name

    written = []
    monkeypatch.setattr(oracle, "write_oracle_features", lambda out, names, grid, truth: written.append((out, names, grid)))
    monkeypatch.setattr("phrasedet.data.synthetic.ground_truth.load_ground_truth", lambda root: {})
    oracle_features(str(tmp_path), resume=False, language="long_tail")
    assert written == [(str(tmp_path / "features"), [builtin_name(n, "long_tail") for n in
                        [f"flickr30k_captions_{s}" for s in SPLITS] + ["flickr30k_pointing_val", "flickr30k_pointing_test"]], 16)]
    assert written[0][1][0] == "builtin_longtail_flickr30k_captions_train"
