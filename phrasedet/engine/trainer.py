"""``PhrasedetTrainer``: Detectron2's ``DefaultTrainer`` for every phrasedet task family.

The task of a split is its ``MetadataCatalog`` ``evaluator_type``, and it picks the loaders and the
evaluator, as Detectron2's own ``train_net.py`` does:

| task | mapper | evaluator |
|---|---|---|
| ``phrase_detection`` | :class:`PhraseDatasetMapper` (at test, every image is asked about the whole test vocabulary when ``TEST.PHRASE_DETECTION.VOCABULARY`` is ``"dataset"``) | :class:`PhraseDetectionEvaluator` (with the phrase filter of ``TEST.PHRASE_FILTER`` when set, built once per split per evaluation by the evaluating process, :mod:`.phrase_filtering`) |
| ``retrieval`` | :class:`CaptionDatasetMapper` (pixels, or precomputed feature rows) | :class:`RetrievalEvaluator` (given the model's scorer) |
| ``pointing`` | :class:`PointingDatasetMapper` (``DSVELoc``), or the phrase-detection test mapper asked about each query's phrase (``PhraseRCNN``) | :class:`PointingGameEvaluator` |
| ``image_labels`` | :class:`ImageLabelsMapper` | :class:`ImageLabelsEvaluator` |
| ``coco`` (object detection) | :class:`DetectionDatasetMapper` (Detectron2's ``DatasetMapper``; built-in images drawn from their ``render_key``) | Detectron2's ``COCOEvaluator`` (box AP) |

Training splits are phrase-grounding (``PhraseRCNN``), caption (``ImageTextEmbedding``,
``DSVELoc``), image-labels (``MultiLabelImageClassifier``) or detection splits (Detectron2's
``GeneralizedRCNN``: the built-in pretrained detector); pointing splits are for evaluation only.

It also trains on several CPU processes with gloo, builds the optimizer of
``PHRASEDET.SOLVER`` and adds the retrieval hooks: unfreezing a backbone frozen until
``MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS``, and the warm-up of the ranking loss
(``MODEL.RETRIEVAL.LOSS.WARMUP_ALL_NEGATIVES_ITERS``). Its checkpointer is
:class:`~phrasedet.modeling.checkpoint.PhrasedetCheckpointer` (``MODEL.WEIGHTS`` loads completely
into the parts it is meant for, or fails). ``PhraseTrainer`` is the same class under its first name.
"""
import functools
import logging
import os

import torch.distributed as dist

from detectron2.data import (DatasetCatalog, MetadataCatalog, build_detection_test_loader, build_detection_train_loader,
                             get_detection_dataset_dicts)
from detectron2.engine import DefaultTrainer
from detectron2.evaluation import COCOEvaluator
from detectron2.utils import comm

from phrasedet.data import (CaptionDatasetMapper, DetectionDatasetMapper, ImageLabelsMapper, PhraseDatasetMapper,
                            PointingDatasetMapper, attach_image_features, phrase_detector_pointing_mapper)
from phrasedet.data.datasets import (DETECTION_EVALUATOR_TYPE, EVALUATOR_TYPE, IMAGE_LABELS_EVALUATOR_TYPE,
                                     POINTING_EVALUATOR_TYPE, RETRIEVAL_EVALUATOR_TYPE)
from phrasedet.data.synthetic.labels import label_groups
from phrasedet.data.image_features import stored_image_input
from phrasedet.data.train_stream import ResumableTrainStream, build_resumable_train_loader
from phrasedet.evaluation import (ImageLabelsEvaluator, PhraseDetectionEvaluator, PointingGameEvaluator, RetrievalEvaluator,
                                  test_vocabulary)
from phrasedet.modeling.checkpoint import PhrasedetCheckpointer
from phrasedet.modeling.losses import RankingLoss

from .ddp import cpu_safe_ddp
from .exact_resume import IterationSeedHook, trim_metrics_file
from .hooks import BackboneUnfreezeHook, NegativesWarmupHook
from .optimizer import build_optimizer
from .phrase_filtering import PHRASE_FILTER_FILE, build_phrase_filter, check_phrase_filter_config, phrase_filter_enabled

__all__ = ["PhrasedetTrainer", "PhraseTrainer", "broadcast_buffers", "build_train_loader", "dataset_task", "exact_resume_supported"]

logger = logging.getLogger("phrasedet.engine")
TASKS = (EVALUATOR_TYPE, RETRIEVAL_EVALUATOR_TYPE, POINTING_EVALUATOR_TYPE, IMAGE_LABELS_EVALUATOR_TYPE,
         DETECTION_EVALUATOR_TYPE)


def dataset_task(name: str) -> str:
    """The task family of a registered split (its ``evaluator_type``)."""
    task = MetadataCatalog.get(name).get("evaluator_type", None)
    if task not in TASKS:
        raise NotImplementedError(f"dataset {name!r} has evaluator_type {task!r}; phrasedet trains and evaluates {TASKS}")
    return task


def _train_task(cfg) -> str:
    tasks = {name: dataset_task(name) for name in cfg.DATASETS.TRAIN}
    if len(set(tasks.values())) != 1:
        raise ValueError(f"DATASETS.TRAIN mixes task families: {tasks}")
    task = next(iter(tasks.values()))
    if task == POINTING_EVALUATOR_TYPE:
        raise ValueError(f"DATASETS.TRAIN {list(tasks)}: pointing-game splits are for evaluation; DSVE-loc trains on "
                         "caption splits (e.g. builtin_flickr30k_captions_train)")
    return task


def caption_records(cfg, names) -> list:
    """The records of caption (or pointing) splits ``names``, with precomputed features or maps
    attached when the model reads them."""
    features = stored_image_input(cfg)
    records = []
    for name in names:
        split = DatasetCatalog.get(name)
        records.extend(attach_image_features(split, name, cfg.MODEL.RETRIEVAL.IMAGE_FEATURES_DIR) if features else split)
    return records


def exact_resume_supported(cfg) -> bool:
    """Whether training uses the resumable stream (``--resume`` exact): ``SEED >= 0`` and
    Detectron2's default ``TrainingSampler``."""
    return cfg.SEED >= 0 and cfg.DATALOADER.SAMPLER_TRAIN == "TrainingSampler"


def build_train_loader(cfg, records, mapper, aspect_ratio_grouping: bool):
    """The training loader: :mod:`phrasedet.data.train_stream` (batch ``b`` a function of
    ``SEED`` and ``b``), or Detectron2's own loader when :func:`exact_resume_supported` is false."""
    if not exact_resume_supported(cfg):
        logger.warning("SEED %d / DATALOADER.SAMPLER_TRAIN %s: Detectron2's training loader is used; a run continued "
                       "with --resume will not repeat the interrupted run exactly", cfg.SEED, cfg.DATALOADER.SAMPLER_TRAIN)
        return build_detection_train_loader(cfg, mapper=mapper, dataset=records, aspect_ratio_grouping=aspect_ratio_grouping)
    world = comm.get_world_size()
    if cfg.SOLVER.IMS_PER_BATCH % world:
        raise ValueError(f"SOLVER.IMS_PER_BATCH ({cfg.SOLVER.IMS_PER_BATCH}) must be divisible by the number of processes ({world})")
    return build_resumable_train_loader(records, mapper, cfg.SOLVER.IMS_PER_BATCH // world, cfg.SEED,
                                        cfg.DATALOADER.NUM_WORKERS, aspect_ratio_grouping, comm.get_rank(), world)


def _phrase_train_records(cfg) -> list:
    """Detectron2's training records of ``DATASETS.TRAIN`` (empty images filtered as it does): of
    phrase-grounding and of detection splits."""
    return get_detection_dataset_dicts(cfg.DATASETS.TRAIN, filter_empty=cfg.DATALOADER.FILTER_EMPTY_ANNOTATIONS)


def _phrase_test_loader(cfg, dataset_name):
    phrases = None
    if cfg.TEST.PHRASE_DETECTION.VOCABULARY == "dataset":
        phrases = test_vocabulary(DatasetCatalog.get(dataset_name))
    elif cfg.TEST.PHRASE_DETECTION.VOCABULARY != "image":
        raise ValueError(f"TEST.PHRASE_DETECTION.VOCABULARY must be 'dataset' or 'image', got {cfg.TEST.PHRASE_DETECTION.VOCABULARY!r}")
    return build_detection_test_loader(cfg, dataset_name, mapper=PhraseDatasetMapper(cfg, is_train=False, test_phrases=phrases))


def _caption_test_loader(cfg, dataset_name):
    return build_detection_test_loader(caption_records(cfg, [dataset_name]), mapper=CaptionDatasetMapper(cfg, is_train=False),
                                       batch_size=cfg.TEST.RETRIEVAL.IMS_PER_BATCH, num_workers=cfg.DATALOADER.NUM_WORKERS)


def _pointing_test_loader(cfg, dataset_name):
    if cfg.MODEL.META_ARCHITECTURE == "PhraseRCNN":
        return build_detection_test_loader(cfg, dataset_name, mapper=phrase_detector_pointing_mapper(cfg))
    return build_detection_test_loader(caption_records(cfg, [dataset_name]), mapper=PointingDatasetMapper(cfg),
                                       batch_size=cfg.TEST.POINTING.IMS_PER_BATCH, num_workers=cfg.DATALOADER.NUM_WORKERS)


def _phrase_evaluator(cfg, dataset_name, output_folder, model):
    d = cfg.TEST.PHRASE_DETECTION
    phrase_filter = None
    if phrase_filter_enabled(cfg):
        check_phrase_filter_config(cfg)  # missing files fail now, not after inference
        # built when the evaluator evaluates, by the process that does (the main one)
        phrase_filter = functools.partial(build_phrase_filter, cfg, dataset_name,
                                          os.path.join(output_folder, PHRASE_FILTER_FILE) if output_folder else None)
    if d.PPA and d.VOCABULARY != "dataset":
        raise ValueError("TEST.PHRASE_DETECTION.PPA needs TEST.PHRASE_DETECTION.VOCABULARY 'dataset' (augmented phrases "
                         f"must be scored in every image), got {d.VOCABULARY!r}")
    return PhraseDetectionEvaluator(dataset_name, mode=d.MODE, output_dir=output_folder, save_predictions=d.SAVE_PREDICTIONS,
                                    bucket_thresholds=cfg.PHRASEDET.VOCAB.BUCKET_THRESHOLDS, phrase_filter=phrase_filter,
                                    ppa=d.PPA)


def _retrieval_evaluator(cfg, dataset_name, output_folder, model):
    t = cfg.TEST.RETRIEVAL
    scorer = getattr(getattr(model, "module", model), "scorer", None)
    return RetrievalEvaluator(dataset_name, folds=tuple(t.FOLDS), scorer=scorer, chunk_size=t.CHUNK_SIZE,
                              output_dir=output_folder, save_embeddings=t.SAVE_EMBEDDINGS)


def _pointing_evaluator(cfg, dataset_name, output_folder, model):
    t = cfg.TEST.POINTING
    return PointingGameEvaluator(dataset_name, hit_rule=t.HIT_RULE, tolerance=t.TOLERANCE, output_dir=output_folder,
                                 save_predictions=t.SAVE_PREDICTIONS)


def _image_labels_test_loader(cfg, dataset_name):
    return build_detection_test_loader(DatasetCatalog.get(dataset_name), mapper=ImageLabelsMapper(cfg, is_train=False),
                                       batch_size=cfg.TEST.RETRIEVAL.IMS_PER_BATCH, num_workers=cfg.DATALOADER.NUM_WORKERS)


def _image_labels_evaluator(cfg, dataset_name, output_folder, model):
    return ImageLabelsEvaluator(dataset_name, label_groups(cfg.PHRASEDET.PRETRAINING.LABEL_GROUPS))


def _detection_test_loader(cfg, dataset_name):
    return build_detection_test_loader(cfg, dataset_name, mapper=DetectionDatasetMapper(cfg, is_train=False))


def _detection_evaluator(cfg, dataset_name, output_folder, model):
    # box AP only; the ground truth is converted from the records into output_folder once
    return COCOEvaluator(dataset_name, tasks=("bbox",), output_dir=output_folder)


TEST_LOADERS = {EVALUATOR_TYPE: _phrase_test_loader, RETRIEVAL_EVALUATOR_TYPE: _caption_test_loader,
                POINTING_EVALUATOR_TYPE: _pointing_test_loader, IMAGE_LABELS_EVALUATOR_TYPE: _image_labels_test_loader,
                DETECTION_EVALUATOR_TYPE: _detection_test_loader}
EVALUATORS = {EVALUATOR_TYPE: _phrase_evaluator, RETRIEVAL_EVALUATOR_TYPE: _retrieval_evaluator,
              POINTING_EVALUATOR_TYPE: _pointing_evaluator, IMAGE_LABELS_EVALUATOR_TYPE: _image_labels_evaluator,
              DETECTION_EVALUATOR_TYPE: _detection_evaluator}


def broadcast_buffers(model) -> None:
    """Copy the main process's buffers (BatchNorm statistics) to every process.

    Detectron2 trains with ``broadcast_buffers=False``, so each process's BatchNorm layers keep
    running statistics of their own data, and only the main process's go into the checkpoint.
    Evaluating every shard with the main process's makes the in-training numbers those of the
    saved model (``--eval-only`` of ``model_final.pth``), whatever the number of processes.
    """
    if comm.get_world_size() <= 1:
        return
    for buffer in getattr(model, "module", model).buffers():
        dist.broadcast(buffer.data, src=0)


class PhrasedetTrainer(DefaultTrainer):
    def __init__(self, cfg):
        _train_task(cfg)  # a bad DATASETS.TRAIN fails here, before the model is built from it
        with cpu_safe_ddp():
            super().__init__(cfg)

    @classmethod
    def build_train_loader(cls, cfg):
        task = _train_task(cfg)
        if task == RETRIEVAL_EVALUATOR_TYPE:
            # no aspect-ratio grouping: every image of a batch is resized to one square size
            return build_train_loader(cfg, caption_records(cfg, cfg.DATASETS.TRAIN), CaptionDatasetMapper(cfg, is_train=True),
                                      aspect_ratio_grouping=False)
        if task == IMAGE_LABELS_EVALUATOR_TYPE:
            records = [r for name in cfg.DATASETS.TRAIN for r in DatasetCatalog.get(name)]
            return build_train_loader(cfg, records, ImageLabelsMapper(cfg, is_train=True), aspect_ratio_grouping=False)
        mapper = (DetectionDatasetMapper if task == DETECTION_EVALUATOR_TYPE else PhraseDatasetMapper)(cfg, is_train=True)
        return build_train_loader(cfg, _phrase_train_records(cfg), mapper, cfg.DATALOADER.ASPECT_RATIO_GROUPING)

    def resume_or_load(self, resume=True):
        """Detectron2's, then: the training stream starts at the resumed iteration, and
        ``metrics.json`` forgets the iterations the resumed run redoes (:mod:`.exact_resume`)."""
        super().resume_or_load(resume=resume)
        stream = getattr(self._trainer.data_loader, "dataset", None)
        if isinstance(stream, ResumableTrainStream):
            stream.start_at(self.start_iter)
        if resume and self.start_iter > 0 and comm.is_main_process():
            trim_metrics_file(os.path.join(self.cfg.OUTPUT_DIR, "metrics.json"), self.start_iter)

    @classmethod
    def build_test_loader(cls, cfg, dataset_name):
        return TEST_LOADERS[dataset_task(dataset_name)](cfg, dataset_name)

    @classmethod
    def build_evaluator(cls, cfg, dataset_name, output_folder=None, model=None):
        output_folder = output_folder or os.path.join(cfg.OUTPUT_DIR, "inference", dataset_name)
        return EVALUATORS[dataset_task(dataset_name)](cfg, dataset_name, output_folder, model)

    @classmethod
    def build_optimizer(cls, cfg, model):
        return build_optimizer(cfg, model)

    @classmethod
    def test(cls, cfg, model, evaluators=None):
        """Detectron2's ``test``, with each split's evaluator built knowing the model (the
        retrieval evaluator scores with the model's scorer), and every process evaluating with the
        main process's buffers (:func:`broadcast_buffers`)."""
        if evaluators is None:
            evaluators = [cls.build_evaluator(cfg, name, model=model) for name in cfg.DATASETS.TEST]
        broadcast_buffers(model)
        return super().test(cfg, model, evaluators)

    def build_hooks(self):
        # DefaultTrainer.__init__ made a DetectionCheckpointer just before calling this: every hook
        # (periodic checkpoints, best model) and resume_or_load use ours instead, with its checkpointables
        old = self.checkpointer
        self.checkpointer = PhrasedetCheckpointer.from_config(self.cfg, old.model, old.save_dir, **old.checkpointables)
        hooks = super().build_hooks()
        model = getattr(self.model, "module", self.model)
        start = self.cfg.MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS
        if start > 0 and getattr(model, "uses_pixels", False):
            hooks.insert(0, BackboneUnfreezeHook(start))
        loss = self.cfg.MODEL.RETRIEVAL.LOSS
        if loss.WARMUP_ALL_NEGATIVES_ITERS > 0 and isinstance(getattr(model, "loss", None), RankingLoss):
            hooks.insert(0, NegativesWarmupHook(loss.WARMUP_ALL_NEGATIVES_ITERS, loss.NEGATIVES))
        if self.cfg.MODEL.PHRASE_ROI_HEADS.NPA.ENABLED and hasattr(model, "negative_phrases"):
            from .npa_hook import NPA_CHECKPOINT_KEY, NegativePhraseHook

            npa = NegativePhraseHook(self.cfg, _phrase_train_records(self.cfg))
            self.checkpointer.add_checkpointable(NPA_CHECKPOINT_KEY, npa)  # --resume goes on with the table
            hooks.insert(0, npa)  # right after the seeding hook: the table exists before the first step
        if exact_resume_supported(self.cfg):
            hooks.insert(0, IterationSeedHook(self.cfg.SEED))  # first, so every hook's draws are seeded too
        return hooks


PhraseTrainer = PhrasedetTrainer
