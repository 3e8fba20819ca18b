"""The miniature tree (tests/realdata/miniature.py): every registered real split loads from it with
the expected number of images, and what the readers make of it is what the files say."""
import os
import subprocess
import sys

import pytest
from detectron2.data import DatasetCatalog

from .miniature import EXPECTED_IMAGES, PRECOMP_DIM, SKIP_THOUGHTS_DIM, VGG19_DIM, is_real_split


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def _real_splits_of_a_fresh_import():
    """The real splits ``import phrasedet`` registers, listed by a new interpreter: this test
    process also holds the splits that other tests registered."""
    code = ("import phrasedet; from detectron2.data import DatasetCatalog; from tests.realdata.miniature import "
            "is_real_split; print(*filter(is_real_split, DatasetCatalog.list()))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_every_registered_real_split_is_in_the_miniature():
    assert sorted(_real_splits_of_a_fresh_import()) == sorted(EXPECTED_IMAGES)


@pytest.mark.parametrize("name", sorted(EXPECTED_IMAGES))
def test_split_loads_with_its_images(name, miniature_datasets):
    records = DatasetCatalog.get(name)
    assert len(records) == EXPECTED_IMAGES[name]
    assert all(r["file_name"].startswith(miniature_datasets) or r["file_name"] == "" for r in records)


def test_the_readers_see_what_the_files_say(miniature_datasets):
    # Flickr30K Entities: 10002456's chain 1 has two boxes (union box), chain 5 none; the unrelated caption is dropped.
    (workers,) = [r for r in DatasetCatalog.get("flickr30k_entities_train") if r["image_id"] == "10002456"]
    several_men = workers["annotations"][0]
    assert (several_men["phrase_raw"], several_men["bbox"]) == ("Several men", [4.0, 9.0, 60.0, 47.0])
    assert [u["reason"] for u in workers["unboxed_phrases"]] == ["nobox", "nobox"]  # a tall structure, a large rig
    (dog,) = [r for r in DatasetCatalog.get("flickr30k_entities_test") if r["image_id"] == "3000017878"]
    assert dog["unrelated_captions"] == [4]
    # the token file and Karpathy's file give the same captions as Sentences/
    token, karpathy, entities = (DatasetCatalog.get(f"flickr30k_{s}_test") for s in ("token", "karpathy", "entities_captions"))
    assert [r["captions"] for r in token] == [r["captions"] for r in karpathy] == [r["captions"] for r in entities]
    # COCO: train holds restval; captions are the official ones (522418 has 6, the first 5 kept), with sizes
    coco = {r["image_id"]: r for r in DatasetCatalog.get("coco_karpathy_train")}
    assert sorted(coco) == ["318556", "42", "522418", "9"]
    assert len(coco["522418"]["captions"]) == 5 and (coco["522418"]["height"], coco["522418"]["width"]) == (480, 640)
    assert coco["522418"]["file_name"].endswith("coco/val2014/COCO_val2014_000000522418.jpg")
    # Visual Genome: the unseen variant leaves out 2 (COCO 42, Karpathy restval)
    assert [r["image_id"] for r in DatasetCatalog.get("visual_genome_pointing_unseen")] == ["1", "3", "6"]
    # ReferIt: Hu et al.'s lists pick the images; unc's split field picks testA
    (test_a,) = DatasetCatalog.get("referit_unc_testA")
    assert test_a["image_id"] == "9007" and test_a["captions"] == ["man in middle", "sky top"]
    # VSE++: f30k has a row per caption (im_div 5), COCO one per image; testall begins with test
    f30k, coco_all, coco_test = (DatasetCatalog.get(n) for n in ("vsepp_f30k_precomp_test", "vsepp_coco_precomp_testall",
                                                                  "vsepp_coco_precomp_test"))
    assert [r["feature_row"] for r in f30k] == [0, 5] and [r["feature_row"] for r in coco_all[:2]] == [0, 1]
    assert [r["captions"] for r in coco_all[:5]] == [r["captions"] for r in coco_test]


def test_feature_and_word_vector_files_have_the_configs_dimensions(miniature_datasets):
    import numpy as np

    from phrasedet.text.word_vectors import load_word_vectors

    assert np.load(f"{miniature_datasets}/features/flickr30k_vgg19_10crop/flickr30k_entities_captions_train.npy").shape == (3, VGG19_DIM)
    assert np.load(f"{miniature_datasets}/data/coco_precomp/testall_ims.npy").shape == (10, PRECOMP_DIM)
    kv = load_word_vectors(f"{miniature_datasets}/word_vectors/skip_thoughts_utable_620d.txt")
    assert kv.vector_size == SKIP_THOUGHTS_DIM and "giraffes" in kv.key_to_index


# Config keys naming a data file or folder (weights keys are the checkpoints' business).
DATA_PATH_KEYS = ("MODEL.RETRIEVAL.IMAGE_FEATURES_DIR", "PHRASEDET.RETRIEVAL_STAGES.STAGE1_IMAGE_FEATURES_DIR",
                  "PHRASEDET.TEXT.WORD_VECTORS_PATH", "TEST.PHRASE_FILTER.FILE")


def test_every_data_path_a_config_names_is_in_the_datasets_tree(miniature_datasets, tmp_path, monkeypatch):
    """Run from an empty folder: each non-empty data path of each config is found under
    $PHRASEDET_DATASETS (here the miniature), none in the working directory."""
    import functools
    import os

    from phrasedet.paths import resolve_data_path
    from tests.test_configs import CONFIG_DIR, CONFIGS, _load

    monkeypatch.chdir(tmp_path)
    named = {}
    for path in CONFIGS:
        cfg = _load(path)
        for key in DATA_PATH_KEYS:
            value = functools.reduce(getattr, key.split("."), cfg)
            if value:
                named[(os.path.relpath(path, CONFIG_DIR), key)] = value
                assert resolve_data_path(value, key).startswith(miniature_datasets), (path, key, value)
    assert named == {
        ("retrieval/two_branch_flickr.yaml", "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR"): "features/flickr30k_vgg19_10crop",
        ("pointing/dsve_loc_R152_coco.yaml", "PHRASEDET.TEXT.WORD_VECTORS_PATH"): "word_vectors/skip_thoughts_utable_620d.txt",
    }


def test_the_tool_writes_the_tree_into_an_empty_folder_only(tmp_path, capsys):
    from tests.evaluation.retrieval_toy import load_tool

    tool = load_tool("make_miniature_datasets")
    tool.main([str(tmp_path / "mini")])
    assert (tmp_path / "mini" / "refclef" / "refs(unc).p").is_file()
    assert f"use PHRASEDET_DATASETS={tmp_path / 'mini'}" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="is not empty"):
        tool.main([str(tmp_path / "mini")])
