"""One process and two processes (gloo on CPU, images interleaved between ranks) give identical
results, per-phrase APs and prediction records."""
import json
import math

from detectron2.data import DatasetCatalog
from detectron2.engine import launch
from detectron2.utils import comm

from phrasedet.engine import finish_distributed
from phrasedet.evaluation import PhraseDetectionEvaluator, evaluate_predictions_file, test_vocabulary

from .toy import TOY_TEST, noisy_outputs, register_toy


def _evaluate(output_dir, result_path, gather_bytes=None):
    """Run in every process: rank r evaluates images r, r + W, r + 2W, ... (interleaved)."""
    import phrasedet  # noqa: F401  (a spawned process starts bare)
    from phrasedet.evaluation.phrase_detection import evaluator as evaluator_module

    if gather_bytes is not None:  # one image per gather round: several rounds, uneven per rank
        evaluator_module._GATHER_BYTES = gather_bytes

    register_toy()
    dicts = DatasetCatalog.get(TOY_TEST)
    phrases = test_vocabulary(dicts) + ["phrase not in the test set"]  # extra rows are ignored
    evaluator = PhraseDetectionEvaluator(TOY_TEST, mode="reference", output_dir=output_dir)
    evaluator.reset()
    rank, world = comm.get_rank(), comm.get_world_size()
    for n in range(rank, len(dicts), world):
        evaluator.process([dicts[n]], [noisy_outputs(dicts[n], phrases, k=2)])
    results = evaluator.evaluate()
    if comm.is_main_process():
        with open(result_path, "w") as f:
            json.dump(results, f)
    else:
        assert results == {}
    finish_distributed()


def _load(path):
    return json.loads(path.read_text())


def test_one_and_two_processes_agree(tmp_path):
    register_toy()
    single, double = tmp_path / "single", tmp_path / "double"
    _evaluate(str(single), str(tmp_path / "single.json"))
    launch(_evaluate, 2, dist_url="auto", args=(str(double), str(tmp_path / "double.json"), 1))

    one, two = _load(tmp_path / "single.json"), _load(tmp_path / "double.json")
    m = one["phrase_detection"]
    assert 0 < m["mAP"] < 100 and m["num_phrases_zero_shot"] and m["num_phrases_common"]
    assert one.keys() == two.keys() == {"phrase_detection"}
    for key, value in m.items():
        other = two["phrase_detection"][key]
        assert (math.isnan(value) and math.isnan(other)) or value == other, key
    assert _load(single / "phrase_aps.json") == _load(double / "phrase_aps.json")
    lines_one = (single / "phrase_predictions.jsonl").read_text().splitlines()
    lines_two = (double / "phrase_predictions.jsonl").read_text().splitlines()
    assert sorted(lines_one) == sorted(lines_two) and lines_one != lines_two  # rank order in the merged file
    assert not list(double.glob("*.part*"))
    again = evaluate_predictions_file(str(double / "phrase_predictions.jsonl"), TOY_TEST, "reference")
    assert all((math.isnan(v) and math.isnan(again["phrase_detection"][k])) or v == again["phrase_detection"][k]
               for k, v in m.items())


def _varying_k_outputs(record, phrases, n):
    """Image n of the split has K = 0, 1 or 3 detections per phrase (n % 3): image 0 has none, as
    an image without proposals; a detector gives fewer than K boxes when it has fewer proposals."""
    k = (0, 1, 3)[n % 3]
    out = noisy_outputs(record, phrases, k=max(k, 1))
    return {"phrases": phrases, "scores": out["scores"][:, :k], "boxes": out["boxes"][:, :k]}


def _evaluate_in_order(output_dir, result_path, seed=None):
    """Run in every process: the images in dataset order (``seed`` None) or shuffled, rank r taking
    positions r, r + W, ... of that order."""
    import numpy as np

    import phrasedet  # noqa: F401  (a spawned process starts bare)

    register_toy()
    dicts = DatasetCatalog.get(TOY_TEST)
    phrases = test_vocabulary(dicts)
    order = list(range(len(dicts))) if seed is None else np.random.default_rng(seed).permutation(len(dicts)).tolist()
    evaluator = PhraseDetectionEvaluator(TOY_TEST, mode="standard", output_dir=output_dir)
    evaluator.reset()
    for n in order[comm.get_rank()::comm.get_world_size()]:
        evaluator.process([dicts[n]], [_varying_k_outputs(dicts[n], phrases, n)])
    results = evaluator.evaluate()
    if comm.is_main_process():
        with open(result_path, "w") as f:
            json.dump(results, f, sort_keys=True)  # NaN written as NaN: the strings compare exactly
    finish_distributed()


def test_results_do_not_depend_on_the_first_image_nor_on_order_or_processes(tmp_path):
    """Issue 23: K used to come from the first image processed, so an image without detections
    first raised "need at least one detection per phrase, got K=0", and a later image with more
    detections than the first one was refused. The same images in dataset order (image 0 has
    none), shuffled (its first image has K=3) and over 2 processes give the same results."""
    register_toy()
    runs = {"ordered": None, "shuffled": 5}
    for name, seed in runs.items():
        _evaluate_in_order(str(tmp_path / name), str(tmp_path / f"{name}.json"), seed)
    launch(_evaluate_in_order, 2, dist_url="auto", args=(str(tmp_path / "two"), str(tmp_path / "two.json"), 5))
    texts = {name: (tmp_path / f"{name}.json").read_text() for name in ("ordered", "shuffled", "two")}
    assert texts["ordered"] == texts["shuffled"] == texts["two"]
    m = json.loads(texts["ordered"])["phrase_detection"]
    assert 0 < m["mAP"] < 100 and 0 < m["loc_acc"] < 100
    aps = [(tmp_path / name / "phrase_aps.json").read_text() for name in ("ordered", "shuffled", "two")]
    assert aps[0] == aps[1] == aps[2]
    records = [sorted((tmp_path / name / "phrase_predictions.jsonl").read_text().splitlines())
               for name in ("ordered", "shuffled", "two")]
    assert records[0] == records[1] == records[2] and '"image_id": "1000"' not in "".join(records[0])
    again = evaluate_predictions_file(str(tmp_path / "two" / "phrase_predictions.jsonl"), TOY_TEST, "standard")
    assert json.dumps(again, sort_keys=True) == texts["ordered"]
