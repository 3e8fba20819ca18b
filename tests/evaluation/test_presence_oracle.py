"""The phrase-presence oracle: the mAP of the detections of phrases present in their image only."""
import json
import math

import numpy as np
import pytest

from phrasedet.evaluation import evaluate_phrase_detection, evaluate_predictions_file
from phrasedet.evaluation.phrase_detection.presence_oracle import presence_oracle_detections

from .test_predictions_file import DATASET, builtin_run  # noqa: F401  (the module fixture, reused)
from .test_ppa_evaluation import NoSynonyms
from .toy import A, B, FAR, ap_of, build
from ..tool_runs import run_tool


def test_false_positives_on_absent_phrases_leave_and_nothing_else_changes():
    # "dog" is in image a only; image b, without a dog, scores its (wrong) box highest
    gt, dets = build(["a", "b"], [("a", "dog", A), ("a", "cat", B), ("b", "cat", B)],
                     {("a", "dog"): [(0.5, A)], ("b", "dog"): [(0.9, FAR)],
                      ("a", "cat"): [(0.7, B)], ("b", "cat"): [(0.2, B)]})
    plain = evaluate_phrase_detection(gt, dets)
    assert ap_of(plain, "dog") == 0.5  # its true positive at rank 2: precision 1/2
    assert ap_of(plain, "cat") == 1.0
    oracle_dets = presence_oracle_detections(dets)
    oracle = evaluate_phrase_detection(gt, oracle_dets)
    assert ap_of(oracle, "dog") == 1.0 and ap_of(oracle, "cat") == 1.0
    assert np.isnan(oracle_dets.scores[1, gt.phrases.index("dog")]).all()
    assert oracle_dets.scores[0, gt.phrases.index("dog"), 0] == np.float32(0.5)
    assert (oracle.num_localized == plain.num_localized).all()
    assert dets.scores[1, gt.phrases.index("dog"), 0] == np.float32(0.9)  # the input is not changed


def _drop_absent_records(src, dst, present):
    """The slow, obvious oracle: a predictions file without the records of absent phrases."""
    kept = 0
    with open(src) as f, open(dst, "w") as out:
        for line in f:
            r = json.loads(line)
            if (r["image_id"], r["phrase"]) in present:
                out.write(line)
                kept += 1
    return kept


@pytest.mark.parametrize("mode", ["reference", "standard"])
def test_the_oracle_equals_evaluating_a_file_without_the_absent_phrases_records(builtin_run, mode, tmp_path):  # noqa: F811
    from detectron2.data import DatasetCatalog

    out, _ = builtin_run
    src = out / mode / "phrase_predictions.jsonl"
    present = {(d["image_id"], a["phrase"]) for d in DatasetCatalog.get(DATASET) for a in d["annotations"]}
    total = sum(1 for _ in open(src))
    kept = _drop_absent_records(src, tmp_path / "present.jsonl", present)
    assert 0 < kept < total / 10  # most (image, phrase) pairs of the built-in split are absent ones
    got = evaluate_predictions_file(str(src), DATASET, mode, presence_oracle=True)
    slow = evaluate_predictions_file(str(tmp_path / "present.jsonl"), DATASET, mode)["phrase_detection"]
    oracle = got["phrase_detection_presence_oracle"]
    assert oracle.keys() == slow.keys()
    for key in slow:
        assert (math.isnan(slow[key]) and math.isnan(oracle[key])) or oracle[key] == slow[key], key
    assert oracle["mAP"] > got["phrase_detection"]["mAP"] and oracle["loc_acc"] == got["phrase_detection"]["loc_acc"]


def test_the_oracle_is_taken_before_a_filter_and_on_the_plain_ground_truth_with_ppa(builtin_run):  # noqa: F811
    from detectron2.data import DatasetCatalog

    from phrasedet.evaluation import PhraseFilter

    out, _ = builtin_run
    src = str(out / "reference" / "phrase_predictions.jsonl")
    alone = evaluate_predictions_file(src, DATASET, presence_oracle=True)["phrase_detection_presence_oracle"]
    nothing_allowed = PhraseFilter({d["image_id"]: [] for d in DatasetCatalog.get(DATASET)}, top_n=1)
    filtered = evaluate_predictions_file(src, DATASET, phrase_filter=nothing_allowed, presence_oracle=True)
    assert filtered["phrase_detection_presence_oracle"] == alone
    assert filtered["phrase_detection"]["mAP"] < filtered["phrase_detection_unfiltered"]["mAP"]
    with_ppa = evaluate_predictions_file(src, DATASET, ppa=True, ppa_lexicon=NoSynonyms(), presence_oracle=True)
    assert with_ppa["phrase_detection_presence_oracle"] == alone  # the plain ground truth's pairs
    assert with_ppa["phrase_detection_ppa"]["num_instances_few_shot"] > alone["num_instances_few_shot"]


def test_the_command_prints_both_tables(builtin_run, tmp_path):  # noqa: F811
    out, _ = builtin_run
    printed = run_tool("evaluate_predictions.py", "--predictions", out / "reference" / "phrase_predictions.jsonl",
                       "--dataset", DATASET, "--presence-oracle", "--output-dir", tmp_path).output
    assert "detections of the phrases present in their image only (presence oracle), in %:" in printed
    saved = json.loads((tmp_path / "phrase_detection_results.json").read_text())
    assert set(saved) == {"phrase_detection", "phrase_detection_presence_oracle"}
    assert f"{saved['phrase_detection_presence_oracle']['mAP']:.2f}" in printed.split("presence oracle")[1]
