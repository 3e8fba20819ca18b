"""PhraseDetectionEvaluator: localization-only outputs, errors raised early."""
import numpy as np
import pytest
from detectron2.data import DatasetCatalog

from phrasedet.evaluation import PhraseDetectionEvaluator, test_vocabulary
from phrasedet.evaluation.phrase_detection.ground_truth import PhraseGroundTruth

from .toy import TOY_TEST, noisy_outputs, register_toy


def _run(outputs_of):
    evaluator = PhraseDetectionEvaluator(TOY_TEST, output_dir=None)
    evaluator.reset()
    for d in DatasetCatalog.get(TOY_TEST):
        evaluator.process([d], [outputs_of(d)])
    return evaluator.evaluate()["phrase_detection"]


def test_image_own_phrases_give_the_same_localization():
    register_toy()
    vocab = test_vocabulary(DatasetCatalog.get(TOY_TEST))

    def own(d):  # the image's own phrases (with repeats), rows taken from the open-vocabulary output
        full = noisy_outputs(d, vocab)
        rows = [vocab.index(a["phrase"]) for a in d["annotations"]]
        return {"phrases": [a["phrase"] for a in d["annotations"]], "scores": full["scores"][rows],
                "boxes": full["boxes"][rows]}

    open_vocab, localization_only = _run(lambda d: noisy_outputs(d, vocab)), _run(own)
    assert localization_only["loc_acc"] == open_vocab["loc_acc"]
    # no detections in images without the phrase: fewer false positives
    assert localization_only["mAP"] > open_vocab["mAP"]


def test_unknown_image_and_missing_train_dataset_are_errors():
    register_toy()
    evaluator = PhraseDetectionEvaluator(TOY_TEST)
    with pytest.raises(ValueError, match="'nope'"):
        evaluator.process([{"image_id": "nope"}], [{"phrases": [], "scores": [], "boxes": []}])
    DatasetCatalog.register("evaltest_no_train", lambda: [])
    try:
        with pytest.raises(ValueError, match="train_dataset"):
            PhraseDetectionEvaluator("evaltest_no_train")
    finally:
        DatasetCatalog.remove("evaltest_no_train")


def test_records_without_annotations_are_images_without_instances():
    """A test record may have no "annotations" key (an image nobody described): it is an image of
    the split (a row of scores), with no instance and no phrase of its own."""
    records = [{"image_id": "im0"}, {"image_id": "im1", "annotations": [{"phrase": "dog", "bbox": [0, 0, 1, 1]},
                                                                         {"phrase": "cat", "bbox": [0, 0, 2, 2]}]}]
    assert test_vocabulary(records) == ["cat", "dog"]
    gt = PhraseGroundTruth.from_dataset_dicts(records)
    assert (gt.image_ids, gt.phrases, gt.gt_image.tolist(), gt.gt_phrase.tolist()) == (["im0", "im1"], ["cat", "dog"],
                                                                                       [1, 1], [0, 1])
    # sorted by (image, phrase): "cat" first
    assert gt.gt_box.tolist() == [[0, 0, 2, 2], [0, 0, 1, 1]] and gt.pairs_of_image(0) == slice(0, 0)


def test_unknown_annotated_phrase_names_the_image_and_the_phrase():
    records = [{"image_id": "im7", "annotations": [{"phrase": "dog", "bbox": [0, 0, 1, 1]}]}]
    with pytest.raises(ValueError) as e:
        PhraseGroundTruth.from_dataset_dicts(records, phrases=["cat"])
    assert str(e.value) == "image 'im7': annotated phrase 'dog' is not in the vocabulary"


def test_find_pairs_with_int32_indices_at_a_scale_beyond_int32_keys():
    """50,000 images x 50,000 phrases: the last pair's key is 2.5e9 > 2**31. Indices given as int32
    arrays (as a reader might hold them) must still find it, and miss its neighbour."""
    n = 50_000
    names = [str(i) for i in range(n)]
    gt = PhraseGroundTruth(names, names, [n - 1], [n - 1], [[0, 0, 1, 1]])
    image, phrase = np.array([n - 1, n - 1], np.int32), np.array([n - 1, n - 2], np.int32)
    assert gt.find_pairs(image, phrase).tolist() == [0, -1]
