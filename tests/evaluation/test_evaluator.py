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


def test_exported_images_import_into_another_store_with_more_detections_per_phrase():
    """What a process sends in distributed evaluation: its images' score rows and the boxes of their
    ground-truth pairs; the receiving store (K=3) pads the K=2 rows with "no detection"."""
    from phrasedet.evaluation import PhraseDetections

    # im0: pairs (im0, cat) and (im0, dog); im1: none; im2: (im2, dog)
    gt = PhraseGroundTruth(["im0", "im1", "im2"], ["cat", "dog"], [0, 0, 2], [0, 1, 1],
                           [[0, 0, 1, 1], [0, 0, 2, 2], [0, 0, 3, 3]])
    sender = PhraseDetections(gt, 2)
    rng = np.random.default_rng(0)
    for i in range(3):
        sender.add_image(i, rng.random((2, 2)), rng.random((2, 2, 4)) * 10)
    images, scores, pairs, boxes = sender.export_images([2, 1])
    assert images.tolist() == [2, 1] and pairs.tolist() == [2] and pairs.dtype == np.int64
    assert np.array_equal(scores, sender.scores[[2, 1]]) and np.array_equal(boxes, sender.pair_boxes[[2]])
    receiver = PhraseDetections(gt, 3)
    receiver.pair_boxes[:] = 7.0  # stale boxes of pair 2 must not survive in its third column
    receiver.import_images(*sender.export_images([0, 2]))
    assert receiver.filled.tolist() == [True, False, True]
    np.testing.assert_array_equal(receiver.scores[[0, 2], :, :2], sender.scores[[0, 2]])
    assert np.isnan(receiver.scores[[0, 2], :, 2]).all()
    np.testing.assert_array_equal(receiver.pair_boxes[:, :2], sender.pair_boxes)
    assert np.isnan(receiver.pair_boxes[:, 2]).all()
    nothing = sender.export_images([])  # a plain empty list (float64 to numpy) is no image
    assert (nothing[0].tolist(), nothing[1].shape, nothing[2].tolist()) == ([], (0, 2, 2), [])
    empty = sender.export_images([1])
    assert (empty[0].tolist(), empty[2].tolist(), empty[3].shape) == ([1], [], (0, 2, 4))
    before = sender.scores.copy()
    sender.import_images(*receiver.export_images([0]))  # K=3 rows widen the K=2 store
    assert sender.k == 3 and sender.scores.shape == (3, 2, 3) and sender.pair_boxes.shape == (3, 3, 4)
    np.testing.assert_array_equal(sender.scores[[1, 2], :, :2], before[[1, 2]])
    assert np.isnan(sender.scores[[1, 2], :, 2]).all() and np.isnan(sender.pair_boxes[2, 2]).all()


@pytest.mark.parametrize("args, message", [
    ((["im0", "im1", "im0"], ["cat"], [], [], []), "image_id 'im0' occurs more than once in the dataset"),
    (([1, "1"], ["cat"], [], [], []), "image_id '1' occurs more than once in the dataset"),  # ids are strings
    ((["im0"], ["cat", "dog", "dog", "cat"], [], [], []), "phrase 'dog' occurs more than once in the phrase vocabulary"),
    ((["im0"], ["cat"], [0, 0], [0], [[0, 0, 1, 1]] * 2),
     "gt_image, gt_phrase and gt_box must have the same length, got 2, 1 and 2"),
    ((["im0"], ["cat"], [0], [0], [[0, 0, 1, 1]] * 2), "gt_image, gt_phrase and gt_box must have the same length, got 1, 1 and 2"),
    ((["im0", "im1"], ["cat"], [0, 2], [0, 0], [[0, 0, 1, 1]] * 2),
     "ground-truth instance 1: image index 2 is out of range for 2 images"),
    ((["im0", "im1"], ["cat"], [0, -1], [0, 0], [[0, 0, 1, 1]] * 2),
     "ground-truth instance 1: image index -1 is out of range for 2 images"),
    ((["im0"], ["cat", "dog"], [0, 0, 0], [1, 2, -1], [[0, 0, 1, 1]] * 3),
     "ground-truth instance 1: phrase index 2 is out of range for 2 phrases"),
    ((["im0"], ["cat", "dog"], [0, 0], [0, -1], [[0, 0, 1, 1]] * 2),
     "ground-truth instance 1: phrase index -1 is out of range for 2 phrases"),
])
def test_ground_truth_arguments_are_checked_with_messages_naming_the_culprit(args, message):
    with pytest.raises(ValueError) as e:
        PhraseGroundTruth(*args)
    assert str(e.value) == message


def test_ground_truth_of_one_instance_given_as_scalars_and_the_last_valid_indices():
    gt = PhraseGroundTruth(["im0", "im1"], ["cat", "dog"], 1, 1, [0, 0, 2, 2])  # image N-1, phrase V-1
    assert (gt.gt_image.tolist(), gt.gt_phrase.tolist(), gt.gt_box.tolist()) == ([1], [1], [[0.0, 0.0, 2.0, 2.0]])
    assert (gt.gt_image.dtype, gt.gt_phrase.dtype, gt.gt_box.dtype) == (np.int64, np.int64, np.float64)  # int boxes too
    assert gt.num_gt.tolist() == [0, 1] and gt.pairs_of_image(1) == slice(0, 1) and gt.pairs_of_image(0) == slice(0, 0)


def test_ground_truth_from_plain_empty_lists_evaluates_to_no_ap():
    from phrasedet.evaluation import PhraseDetections, evaluate_phrase_detection

    gt = PhraseGroundTruth(["im0"], ["cat"], [], [], [])  # numpy makes [] float64: the int64 casts allow this
    dets = PhraseDetections(gt, 1)
    dets.add_image(0, [[0.5]], [[[0, 0, 1, 1]]])
    result = evaluate_phrase_detection(gt, dets, "reference")
    assert np.isnan(result.ap).all() and result.num_gt.tolist() == [0] and gt.num_pairs == 0


def test_detections_constructor_and_add_image_name_what_is_wrong():
    from phrasedet.evaluation import PhraseColumns, PhraseDetections

    gt = PhraseGroundTruth(["im0"], ["cat", "dog"], [0], [0], [[0, 0, 10, 10]])
    with pytest.raises(ValueError) as e:
        PhraseDetections(gt, 0)
    assert str(e.value) == "need at least one detection per phrase, got K=0"
    dets = PhraseDetections(gt, 2)
    with pytest.raises(ValueError) as e:
        dets.add_image(0, np.zeros((3, 1)), np.zeros((3, 1, 4)))
    assert str(e.value) == "image 'im0': 3 score rows, expected one per vocabulary phrase (2)"
    with pytest.raises(ValueError) as e:
        dets.add_image(0, np.zeros((3, 1)), np.zeros((3, 1, 4)), PhraseColumns(["cat", "x"], gt.phrase_index))
    assert str(e.value) == "image 'im0': 3 score rows for 2 phrases"


def test_add_image_takes_one_score_per_phrase_and_leaves_unscored_pairs_without_box():
    from phrasedet.evaluation import PhraseColumns, PhraseDetections

    # pairs: (im0, cat), (im0, dog); the model scored "dog" and an unknown phrase, not "cat"
    gt = PhraseGroundTruth(["im0", "im1"], ["cat", "dog"], [0, 0], [0, 1], [[0, 0, 10, 10], [0, 0, 5, 5]])
    dets = PhraseDetections(gt, 2)
    dets.add_image(0, [0.7, 0.2], [[1, 1, 4, 4], [9, 9, 9, 9]], PhraseColumns(["dog", "x"], gt.phrase_index))
    assert np.isnan(dets.scores[0, 0]).all() and dets.scores[0, 1, 0] == np.float32(0.7) and np.isnan(dets.scores[0, 1, 1])
    assert np.isnan(dets.pair_boxes[0]).all()  # "cat" was not scored: no box (not the last output row's)
    assert dets.pair_boxes[1, 0].tolist() == [1, 1, 4, 4] and np.isnan(dets.pair_boxes[1, 1]).all()
    assert dets.finalize() == 1 and dets.filled.tolist() == [True, True] and np.isnan(dets.scores[1]).all()
    assert dets.finalize() == 0


def test_detection_boxes_are_stored_as_float32():
    from phrasedet.evaluation import PhraseDetections, evaluate_phrase_detection

    # 4.99999999 is 5.0 in float32: the detection's IoU with [0, 0, 10, 10] is then exactly 0.5, a hit
    gt = PhraseGroundTruth(["im0"], ["cat"], [0], [0], [[0, 0, 10, 10]])
    dets = PhraseDetections(gt, 1)
    dets.add_image(0, [[0.9]], np.array([[[0.0, 0.0, 10.0, 4.99999999]]]))
    assert dets.pair_boxes.dtype == np.float32 and dets.pair_boxes[0, 0, 3] == 5.0
    assert evaluate_phrase_detection(gt, dets, "reference").ap.tolist() == [1.0]


def test_a_widened_store_keeps_float32_and_k_is_the_largest_k_seen():
    """The default store starts with one column and grows only to the widest image's K': a store
    of the first image's K' = 1 stays [N, V, 1]; an image with K' = 2 widens both arrays, which stay
    float32 (the box of 4.99999999 is stored as 5.0: IoU exactly 0.5, a hit) and NaN where an image
    added before has no second detection."""
    from phrasedet.evaluation import PhraseDetections, evaluate_phrase_detection

    gt = PhraseGroundTruth(["im0", "im1"], ["cat"], [0, 1], [0, 0], [[0, 0, 10, 10], [0, 0, 10, 10]])
    dets = PhraseDetections(gt)
    dets.add_image(0, [[0.8]], [[[0, 0, 10, 10]]])
    assert dets.k == 1 and dets.scores.shape == (2, 1, 1) and dets.pair_boxes.shape == (2, 1, 4)
    dets.add_image(1, [[0.1, 0.9]], np.array([[[50.0, 50.0, 60.0, 60.0], [0.0, 0.0, 10.0, 4.99999999]]]))
    assert dets.k == 2 and dets.scores.dtype == np.float32 and dets.pair_boxes.dtype == np.float32
    assert dets.scores[0, 0, 0] == np.float32(0.8) and np.isnan(dets.scores[0, 0, 1])
    assert np.isnan(dets.pair_boxes[0, 1]).all() and dets.pair_boxes[1, 1, 3] == 5.0
    assert evaluate_phrase_detection(gt, dets, "reference").ap.tolist() == [1.0]  # 0.9 and 0.8 hit; 0.1 misses last


def test_a_scored_detection_with_a_box_that_is_not_finite_names_the_image_and_phrase():
    """Issue 23: a NaN box used to be a silent miss (a diverged model scored 0 without a word).
    A NaN score is "no detection": its box is not read."""
    register_toy()
    d = DatasetCatalog.get(TOY_TEST)[0]
    vocab = test_vocabulary(DatasetCatalog.get(TOY_TEST))
    out = noisy_outputs(d, vocab, k=2)
    out["scores"][1, 0] = float("nan")
    out["boxes"][1, 0] = float("nan")  # no detection: accepted
    evaluator = PhraseDetectionEvaluator(TOY_TEST, output_dir=None)
    evaluator.process([d], [out])
    out["boxes"][3, 1, 2] = float("inf")
    with pytest.raises(ValueError) as e:
        evaluator.process([d], [out])
    assert str(e.value) == (f"image_id '1000': 'boxes' row 3 ({vocab[3]!r}): values must be finite numbers where the "
                            f"score is not NaN, got {out['boxes'][3].tolist()} (1 such rows; a diverged model?)")
