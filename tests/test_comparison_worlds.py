"""phrasedet/engine/comparison/worlds.py: the overrides that put a comparison's runs in a built-in
world (issue 42): none for version 3, the long-tailed datasets, GloVe and 50-wide branches for
``long_tail``, the same as configs/cite_cca_long_tail.yaml."""
import argparse
import os
import re

import pytest

import phrasedet  # noqa: F401  (registers the datasets)
from phrasedet.data.datasets.builtin import builtin_language_of, builtin_name
from phrasedet.engine.comparison.protocol import config_of
from phrasedet.engine.comparison.worlds import WORLDS, World, add_world_argument, get_world

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")


def test_the_default_world_overrides_nothing_so_its_records_stay_valid():
    v3 = get_world("v3")
    assert v3.default and v3.suffix == "" and v3.phrase_detection_opts() == [] and v3.retrieval_opts() == []
    assert v3.caption_splits() == ("builtin_flickr30k_captions_train", "builtin_flickr30k_captions_val",
                                   "builtin_flickr30k_captions_test")


def test_the_long_tail_world_is_what_configs_cite_cca_long_tail_yaml_says():
    world = get_world("long_tail")
    assert not world.default and world.suffix == "_long_tail"
    put = config_of(os.path.join(CONFIGS, "cite_cca.yaml"), world.phrase_detection_opts())
    written = config_of(os.path.join(CONFIGS, "cite_cca_long_tail.yaml"), ["OUTPUT_DIR", put.OUTPUT_DIR])
    assert put == written
    assert put.DATASETS.TRAIN == ("builtin_longtail_flickr30k_entities_train",)
    assert put.MODEL.PHRASE_ROI_HEADS.CITE.EMBED_DIM == 50 and put.PHRASEDET.TEXT.WORD_VECTORS == "glove_6b_50d"


def test_the_long_tail_retrieval_runs_read_the_long_tailed_captions_with_glove():
    cfg = config_of(os.path.join(CONFIGS, "retrieval", "two_branch.yaml"), WORLDS["long_tail"].retrieval_opts())
    assert cfg.DATASETS.TRAIN == ("builtin_longtail_flickr30k_captions_train",)
    assert cfg.DATASETS.TEST == ("builtin_longtail_flickr30k_captions_test",)
    assert cfg.PHRASEDET.TEXT.WORD_VECTORS == "glove_6b_50d"


@pytest.mark.parametrize("world", list(WORLDS))
def test_every_split_a_world_names_is_registered_in_its_language(world):
    w = get_world(world)
    names = [*w.caption_splits(), *(w.dataset(f"flickr30k_entities_{s}") for s in ("train", "val", "test"))]
    assert [builtin_language_of(n) for n in names] == [w.language] * 6


def test_an_unknown_world_or_language_is_named_with_the_known_ones():
    with pytest.raises(KeyError, match="no built-in world 'zipf' \\(known: v3, long_tail\\)"):
        get_world("zipf")
    with pytest.raises(KeyError, match="no built-in language 'zipf' \\(known: v3, long_tail\\)"):
        builtin_name("flickr30k_entities_val", "zipf")
    assert builtin_name("flickr30k_pointing_test", "long_tail") == "builtin_longtail_flickr30k_pointing_test"


def test_a_world_without_a_branch_width_keeps_the_configs_widths():
    world = World("glove_v3", "v3", ("PHRASEDET.TEXT.WORD_VECTORS", "glove_6b_50d"))
    opts = world.phrase_detection_opts()
    assert not world.default and not any("HIDDEN_DIM" in str(o) or "EMBED_DIM" in str(o) for o in opts)
    put = config_of(os.path.join(CONFIGS, "cite_cca.yaml"), opts)
    plain = config_of(os.path.join(CONFIGS, "cite_cca.yaml"), [])
    assert put.MODEL.PHRASE_ROI_HEADS.CITE.EMBED_DIM == plain.MODEL.PHRASE_ROI_HEADS.CITE.EMBED_DIM != 50
    assert put.PHRASEDET.TEXT.WORD_VECTORS == "glove_6b_50d"


def test_the_world_option_offers_the_built_in_worlds_and_says_what_they_are(capsys):
    parser = argparse.ArgumentParser(prog="compare")
    add_world_argument(parser)
    assert parser.parse_args([]).world == "v3" and parser.parse_args(["--world", "long_tail"]).world == "long_tail"
    with pytest.raises(SystemExit):
        parser.parse_args(["--world", "zipf"])
    assert re.search(r"argument --world: invalid choice: 'zipf' \(choose from '?v3'?, '?long_tail'?\)",
                     capsys.readouterr().err)  # quoted from Python 3.12 on
    assert ("--world {v3,long_tail} the built-in world (phrasedet/engine/comparison/worlds.py): v3 (default) or "
            "long_tail, the same scenes in the long-tailed language with GloVe 6B 50-d vectors"
            in " ".join(parser.format_help().split()))
