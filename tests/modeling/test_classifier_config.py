"""Every option of the Embedding Network and CITE classifiers is a config key, and the config reaches them."""
from detectron2.config import get_cfg

from phrasedet.config import add_phrasedet_config
from phrasedet.modeling.classifiers import CITEClassifier, EmbeddingNetClassifier, build_region_classifier


def test_config_keys_match_the_options_and_reach_the_classifiers():
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    for node, cls in (("EMBEDDING_NET", EmbeddingNetClassifier), ("CITE", CITEClassifier)):
        assert set(cfg.MODEL.PHRASE_ROI_HEADS[node]) == {k.upper() for k in cls.DEFAULTS}, node
    cfg.MODEL.PHRASE_ROI_HEADS.CITE.NUM_CONCEPTS = 3
    cfg.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.MARGIN = 0.2
    cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER = "CITEClassifier"
    cite = build_region_classifier(cfg, 12, 8)
    assert len(cite.concepts) == 3 and cite.concept_logits.out_features == 3
    cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER = "EmbeddingNetClassifier"
    assert build_region_classifier(cfg, 12, 8).options["margin"] == 0.2
