"""Detectron2 ``DatasetEvaluator`` for phrase detection mAP and phrase localization accuracy."""
import json
import logging
import os
import shutil
from typing import Callable, Optional, Union

import numpy as np
from detectron2.evaluation import DatasetEvaluator
from detectron2.utils import comm

from phrasedet.data.statistics import training_vocabulary
from .dataset import load_test_split, train_dataset_of
from .detections import PhraseColumns, PhraseDetections, check_detections, detection_arrays
from .phrase_detection_ap import MODES, evaluate_phrase_detection
from .phrase_filter import PhraseFilter, evaluate_with_filter, format_filtered_report
from .ppa_ground_truth import augment_ground_truth, build_test_augmenter, evaluate_with_ppa, format_ppa_report
from .predictions import PredictionWriter
from .report import format_results_table
from ..distributed import DistributedEvaluatorMixin

__all__ = ["PhraseDetectionEvaluator"]

PREDICTIONS_FILE = "phrase_predictions.jsonl"
PHRASE_APS_FILE = "phrase_aps.json"
# Per-phrase APs without the phrase filter, written next to PHRASE_APS_FILE when a filter is used.
PHRASE_APS_UNFILTERED_FILE = "phrase_aps_unfiltered.json"
# Per-phrase APs on the PPA-augmented ground truth (filtered when a filter is used), with ppa=True.
PHRASE_APS_PPA_FILE = "phrase_aps_ppa.json"
# Bytes of scores one process sends per gather round (bounds the memory of the gather).
_GATHER_BYTES = 64 << 20


class PhraseDetectionEvaluator(DistributedEvaluatorMixin, DatasetEvaluator):
    """Phrase detection mAP (zero/few/common-shot buckets) and localization accuracy.

    Each model output is ``{"phrases": list[str] (P), "scores": [P, K], "boxes": [P, K, 4]}``
    (boxes xyxy in original image coordinates, K detections per phrase sorted by score; K may
    differ between images, 0 included: the store takes the largest). A NaN score is "no
    detection"; the box of any other score must be finite (ValueError naming the image, the
    phrase and k: a diverged model gives NaN boxes). Images
    are identified by ``image_id`` and ordered as in the dataset, so the result does not depend on
    the order in which images arrive nor on the number of processes.

    Parameters
    ----------
    dataset_name : str
        Registered test split (its ``train_dataset`` metadata names the split whose instance
        counts define the buckets).
    mode : "reference" or "standard"
        Labelling of detections (docs/EVALUATION.md).
    iou_thresh : float
        IoU for a true positive and for a localized instance.
    output_dir : str, optional
        Where ``phrase_aps.json`` and ``phrase_predictions.jsonl`` are written (main process).
    distributed : bool
        Gather the detections of all processes to the main one (other processes return {}).
        If False, each process evaluates what it saw.
    save_predictions : bool
        Write every detection to ``<output_dir>/phrase_predictions.jsonl`` (readable by
        ``tools/evaluation/evaluate_predictions.py``). Each process streams its part to
        ``phrase_predictions.jsonl.part<rank>``, so ``output_dir`` must be visible to all
        processes. Open-vocabulary runs write N_images x V x K records (Flickr30K: ~5M lines).
    train_dataset : str, optional
        Overrides the metadata's ``train_dataset``.
    bucket_thresholds : (int, int)
        Training counts ending the zero-shot and few-shot buckets (``PHRASEDET.VOCAB.BUCKET_THRESHOLDS``).
    phrase_filter : PhraseFilter or callable returning one, optional
        Phrase filtering (paper 003 Sec. 6.2, :mod:`.phrase_filter`): after gathering, the
        detections are evaluated as they are, then with the filtered (image, phrase) pairs scored
        -inf. The results become ``{"phrase_detection": filtered metrics (with filter_recall,
        filter_recall_<bucket>, filter_kept in %, filter_top_n), "phrase_detection_unfiltered":
        unfiltered metrics}``. A callable is called once, by the process that evaluates (the
        trainer builds the filter with a retrieval model only there). Without a filter nothing
        changes.
    ppa : bool
        PPA-augmented evaluation (paper 003 Tables III, V, VI; :mod:`.ppa_ground_truth`,
        ``TEST.PHRASE_DETECTION.PPA``): the results also hold ``"phrase_detection_ppa"``, the
        metrics on the ground truth where every instance is also an instance of its phrase's PPA
        phrases (same box); ``"phrase_detection"`` stays the plain metrics. With a phrase filter,
        ``"phrase_detection_ppa"`` is filtered and ``"phrase_detection_ppa_unfiltered"`` is added.
        Needs nltk's WordNet (checked here, before inference) unless ``ppa_lexicon`` is given.
    ppa_lexicon : optional
        The lexicon of the augmenter (``alternatives(word) -> list[str]``); default WordNet.
    """

    def __init__(self, dataset_name: str, mode: str = "reference", iou_thresh: float = 0.5,
                 output_dir: Optional[str] = None, distributed: bool = True, save_predictions: bool = True,
                 *, train_dataset: Optional[str] = None, bucket_thresholds=(0, 100),
                 phrase_filter: Optional[Union[PhraseFilter, Callable[[], PhraseFilter]]] = None,
                 ppa: bool = False, ppa_lexicon=None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self._logger = logging.getLogger(__name__)
        self._dataset_name = dataset_name
        self._mode = mode
        self._iou_thresh = float(iou_thresh)
        self._output_dir = output_dir
        self._distributed = distributed
        self._save_predictions = bool(save_predictions and output_dir)
        self._train_dataset = train_dataset_of(dataset_name, train_dataset)  # fails early when unset
        self._bucket_thresholds = tuple(bucket_thresholds)
        _, self._gt = load_test_split(dataset_name)
        self._plain_gt = None
        if ppa:  # detections are stored over the augmented ground truth (its pairs include the plain ones)
            self._plain_gt = self._gt
            self._gt, _ = augment_ground_truth(self._gt, build_test_augmenter(dataset_name, self._gt, ppa_lexicon))
        if isinstance(phrase_filter, PhraseFilter):
            phrase_filter.check_images(self._gt)  # a filter of another split fails before inference
        elif phrase_filter is not None and not callable(phrase_filter):
            raise TypeError(f"phrase_filter must be a PhraseFilter or a callable returning one, got {type(phrase_filter).__name__}")
        self._phrase_filter = phrase_filter
        self._dets = None
        self._writer = None
        self._columns = (None, None)
        self.reset()

    # ------------------------------------------------------------------ collection
    def _part_path(self, rank: int) -> str:
        return os.path.join(self._output_dir, f"{PREDICTIONS_FILE}.part{rank}")

    def reset(self):
        self._dets = None
        self._columns = (None, None)
        self._num_unknown_rows = 0
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _columns_of(self, phrases) -> PhraseColumns:
        last, columns = self._columns
        if phrases is not last and not (last is not None and len(phrases) == len(last) and phrases == last):
            columns = PhraseColumns(phrases, self._gt.phrase_index)
            self._columns = (phrases, columns)
        return columns

    def process(self, inputs, outputs):
        for inp, out in zip(inputs, outputs):
            image_id = str(inp["image_id"])
            i = self._gt.image_index.get(image_id)
            if i is None:
                raise ValueError(f"image_id {image_id!r} is not in dataset {self._dataset_name!r}")
            phrases = out["phrases"]
            scores, boxes = detection_arrays(out["scores"], out["boxes"])
            columns = self._columns_of(phrases)
            check_detections(image_id, phrases, scores, boxes)
            if self._dets is None:
                self._dets = PhraseDetections(self._gt)  # widened by the images (K is no image's alone)
            self._dets.add_image(i, scores, boxes, None if columns.identity else columns)
            self._num_unknown_rows += columns.num_unknown
            if self._save_predictions:
                if self._writer is None:
                    os.makedirs(self._output_dir, exist_ok=True)
                    self._writer = PredictionWriter(self._part_path(comm.get_rank()) if self._gathers()
                                                    else self._output_path(PREDICTIONS_FILE))
                self._writer.write(image_id, phrases, scores, boxes)

    # ------------------------------------------------------------------ gathering
    def _gather(self) -> None:
        """Move the detections of every process into the main process' matrix, in rounds of at
        most ``_GATHER_BYTES`` per process."""
        local = np.flatnonzero(self._dets.filled) if self._dets is not None else np.zeros(0, np.int64)
        k_local = self._dets.k if self._dets is not None else 0
        info = comm.all_gather((len(local), k_local))
        ks = [k for n, k in info if n > 0]
        if not ks:
            return
        K = max(ks)  # processes whose images had fewer detections per phrase are widened, not refused
        main = comm.is_main_process()
        if main:
            if self._dets is None:
                self._dets = PhraseDetections(self._gt, K)
            self._dets.widen(K)
        chunk = max(1, _GATHER_BYTES // max(1, self._gt.num_phrases * K * 4))
        rounds = max(-(-n // chunk) for n, _ in info)
        for r in range(rounds):
            part = local[r * chunk:(r + 1) * chunk]
            payload = self._dets.export_images(part) if (len(part) and not main) else None
            received = comm.gather(payload, dst=0)
            for p in received if main else ():
                if p is not None:
                    self._dets.import_images(*p)
        if not main:
            self._dets = None

    def _merge_prediction_parts(self) -> None:
        world = comm.get_world_size()
        parts = [self._part_path(r) for r in range(world)]
        missing = [p for p in parts if not os.path.isfile(p)]
        if missing:
            self._logger.warning("%s not written: missing %s (output_dir must be shared by all processes, "
                                 "and every process must have seen images)", PREDICTIONS_FILE, missing)
        with open(os.path.join(self._output_dir, PREDICTIONS_FILE), "wb") as out:
            for p in parts:
                if os.path.isfile(p):
                    with open(p, "rb") as f:
                        shutil.copyfileobj(f, out)
                    os.remove(p)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self):
        if self._writer is not None:
            self._writer.close()
        if self._gathers():
            comm.synchronize()
            num_unknown = sum(comm.all_gather(self._num_unknown_rows))
            self._gather()
            if not comm.is_main_process():
                return {}
            if self._save_predictions:
                self._merge_prediction_parts()
        else:
            num_unknown = self._num_unknown_rows
        if self._dets is None:
            self._logger.warning("[PhraseDetectionEvaluator] Did not receive valid predictions.")
            return {}
        if num_unknown:
            self._logger.info("%d output rows scored phrases without test instances (ignored)", num_unknown)
        missing = self._dets.finalize()
        if missing:
            self._logger.warning("%d of %d test images had no predictions (their instances count as misses)",
                                 missing, self._gt.num_images)
        vocabulary = training_vocabulary([self._train_dataset], self._bucket_thresholds)
        header = "Phrase detection on %s (mode=%s, IoU>=%.2f, buckets from %s training counts)" % (
            self._dataset_name, self._mode, self._iou_thresh, self._train_dataset)
        phrase_filter = self._phrase_filter
        if phrase_filter is not None and not isinstance(phrase_filter, PhraseFilter):
            phrase_filter = phrase_filter()
        per_phrase = {}
        if self._plain_gt is not None:
            results, per_key = evaluate_with_ppa(self._plain_gt, self._gt, self._dets, vocabulary, mode=self._mode,
                                                 iou_thresh=self._iou_thresh, phrase_filter=phrase_filter)
            self._logger.info("%s", format_ppa_report(header, results))
            result, unfiltered = per_key["phrase_detection"], per_key.get("phrase_detection_unfiltered")
            per_phrase[PHRASE_APS_PPA_FILE] = per_key["phrase_detection_ppa"]
        elif phrase_filter is None:
            result = evaluate_phrase_detection(self._gt, self._dets, mode=self._mode, iou_thresh=self._iou_thresh)
            metrics = result.summarize(vocabulary)
            self._logger.info("%s, in %%:\n%s", header, format_results_table(metrics))
            results = {"phrase_detection": metrics}
        else:
            results, result, unfiltered = evaluate_with_filter(self._gt, self._dets, phrase_filter, vocabulary,
                                                               mode=self._mode, iou_thresh=self._iou_thresh)
            self._logger.info("%s", format_filtered_report(header, results))
        per_phrase[PHRASE_APS_FILE] = result
        if phrase_filter is not None:
            per_phrase[PHRASE_APS_UNFILTERED_FILE] = unfiltered
        if self._output_dir:
            os.makedirs(self._output_dir, exist_ok=True)
            for name, r in per_phrase.items():
                with open(self._output_path(name), "w", encoding="utf-8") as f:
                    json.dump(r.per_phrase(vocabulary), f, indent=1)
        return results
