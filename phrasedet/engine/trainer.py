"""``PhraseTrainer``: Detectron2's ``DefaultTrainer`` for phrase-grounding models.

It builds loaders with :class:`PhraseDatasetMapper` (at test time every image is asked about
the whole test vocabulary when ``TEST.PHRASE_DETECTION.VOCABULARY`` is ``"dataset"``), the
phrase-detection evaluator for ``evaluator_type == "phrase_detection"`` splits, and trains on
several CPU processes with gloo.
"""
import os

from detectron2.data import DatasetCatalog, MetadataCatalog, build_detection_test_loader, build_detection_train_loader
from detectron2.engine import DefaultTrainer

from phrasedet.data import PhraseDatasetMapper
from phrasedet.data.datasets import EVALUATOR_TYPE
from phrasedet.evaluation import PhraseDetectionEvaluator, test_vocabulary

from .ddp import cpu_safe_ddp

__all__ = ["PhraseTrainer"]


class PhraseTrainer(DefaultTrainer):
    def __init__(self, cfg):
        with cpu_safe_ddp():
            super().__init__(cfg)

    @classmethod
    def build_train_loader(cls, cfg):
        return build_detection_train_loader(cfg, mapper=PhraseDatasetMapper(cfg, is_train=True))

    @classmethod
    def build_test_loader(cls, cfg, dataset_name):
        phrases = None
        if cfg.TEST.PHRASE_DETECTION.VOCABULARY == "dataset":
            phrases = test_vocabulary(DatasetCatalog.get(dataset_name))
        elif cfg.TEST.PHRASE_DETECTION.VOCABULARY != "image":
            raise ValueError(f"TEST.PHRASE_DETECTION.VOCABULARY must be 'dataset' or 'image', got {cfg.TEST.PHRASE_DETECTION.VOCABULARY!r}")
        return build_detection_test_loader(cfg, dataset_name, mapper=PhraseDatasetMapper(cfg, is_train=False, test_phrases=phrases))

    @classmethod
    def build_evaluator(cls, cfg, dataset_name, output_folder=None):
        evaluator_type = MetadataCatalog.get(dataset_name).get("evaluator_type")
        if evaluator_type != EVALUATOR_TYPE:
            raise NotImplementedError(f"no evaluator for {dataset_name!r} (evaluator_type {evaluator_type!r})")
        output_folder = output_folder or os.path.join(cfg.OUTPUT_DIR, "inference", dataset_name)
        d = cfg.TEST.PHRASE_DETECTION
        return PhraseDetectionEvaluator(dataset_name, mode=d.MODE, output_dir=output_folder, save_predictions=d.SAVE_PREDICTIONS,
                                        bucket_thresholds=cfg.PHRASEDET.VOCAB.BUCKET_THRESHOLDS)
