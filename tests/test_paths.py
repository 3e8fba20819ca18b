"""phrasedet.paths.resolve_data_path: a config's relative data path is found under
$PHRASEDET_DATASETS first, then in the working directory; an absolute one is kept; neither is an
error naming the key and both places."""
import os

import pytest

from phrasedet.paths import datasets_root, resolve_data_path


@pytest.fixture
def places(tmp_path, monkeypatch):
    """$PHRASEDET_DATASETS = tmp/datasets, the working directory tmp/work."""
    root, work = tmp_path / "datasets", tmp_path / "work"
    (root / "features" / "both").mkdir(parents=True)
    (root / "word_vectors").mkdir()
    (root / "word_vectors" / "v.txt").write_text("1 1\na 0.5\n")
    (work / "features" / "both").mkdir(parents=True)
    (work / "output" / "features").mkdir(parents=True)
    monkeypatch.setenv("PHRASEDET_DATASETS", str(root))
    monkeypatch.chdir(work)
    return root, work


def test_relative_path_under_the_datasets_root_first(places):
    root, _ = places
    assert resolve_data_path("word_vectors/v.txt", "K") == os.path.join(str(root), "word_vectors/v.txt")
    assert resolve_data_path("features/both", "K") == os.path.join(str(root), "features/both")  # root wins


def test_relative_path_only_in_the_working_directory(places):
    assert resolve_data_path("output/features", "K") == "output/features"


def test_absolute_and_home_paths_are_kept(places, tmp_path, monkeypatch):
    assert resolve_data_path(str(tmp_path / "nowhere"), "K") == str(tmp_path / "nowhere")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_data_path("~/x", "K") == str(tmp_path / "x")


def test_missing_relative_path_names_the_key_and_both_places(places):
    root, work = places
    with pytest.raises(FileNotFoundError) as e:
        resolve_data_path("features/flickr30k_vgg19_10crop", "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR")
    assert str(e.value) == (
        f"MODEL.RETRIEVAL.IMAGE_FEATURES_DIR 'features/flickr30k_vgg19_10crop': neither "
        f"'{root}/features/flickr30k_vgg19_10crop' (under $PHRASEDET_DATASETS, currently '{root}') nor "
        f"'{work}/features/flickr30k_vgg19_10crop' (under the working directory) exists; docs/DATA.md")


def test_datasets_root_defaults_to_datasets(monkeypatch):
    monkeypatch.delenv("PHRASEDET_DATASETS", raising=False)
    assert datasets_root() == "datasets"


def test_word_vectors_path_of_a_config_is_found_under_the_datasets_root(places):
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config
    from phrasedet.text.build import build_word_vectors

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_list(["PHRASEDET.TEXT.WORD_VECTORS", "file", "PHRASEDET.TEXT.WORD_VECTORS_PATH", "word_vectors/v.txt"])
    assert build_word_vectors(cfg)["a"].tolist() == [0.5]
