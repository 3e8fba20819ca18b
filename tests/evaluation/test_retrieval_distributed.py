"""One process and two processes (gloo on CPU, images interleaved between ranks) give identical
retrieval results and saved files, for the dot product and for another scorer."""
import json

import numpy as np
from detectron2.data import DatasetCatalog
from detectron2.engine import launch
from detectron2.utils import comm

from phrasedet.engine import finish_distributed
from phrasedet.evaluation import EMBEDDINGS_FILE, SCORES_FILE, RetrievalEvaluator

from .retrieval_toy import RETRIEVAL_TOY, NegativeSquaredDistance, register_retrieval_toy, toy_outputs

FOLDS = (1, 2, 3)


def _evaluate(output_dir, result_path):
    """Run in every process: rank r evaluates images r, r + W, r + 2W, ... (interleaved)."""
    import phrasedet  # noqa: F401  (a spawned process starts bare)

    register_retrieval_toy()
    dicts = DatasetCatalog.get(RETRIEVAL_TOY)
    rank, world = comm.get_rank(), comm.get_world_size()
    results = {}
    for name, scorer in (("dot", None), ("distance", NegativeSquaredDistance())):
        evaluator = RetrievalEvaluator(RETRIEVAL_TOY, folds=FOLDS, scorer=scorer, chunk_size=5,
                                       output_dir=f"{output_dir}/{name}")
        evaluator.reset()
        for n in range(rank, len(dicts), world):
            evaluator.process([dicts[n]], [toy_outputs(dicts[n])])
        results[name] = evaluator.evaluate()
    if comm.is_main_process():
        with open(result_path, "w") as f:
            json.dump(results, f)
    else:
        assert results == {"dot": {}, "distance": {}}
    finish_distributed()


def _arrays(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def test_one_and_two_processes_agree(tmp_path):
    register_retrieval_toy()
    single, double = tmp_path / "single", tmp_path / "double"
    _evaluate(str(single), str(tmp_path / "single.json"))
    launch(_evaluate, 2, dist_url="auto", args=(str(double), str(tmp_path / "double.json")))

    one = json.loads((tmp_path / "single.json").read_text())
    two = json.loads((tmp_path / "double.json").read_text())
    assert one == two
    assert set(one["dot"]) == {"retrieval", "retrieval_2fold", "retrieval_3fold"} and one["dot"] != one["distance"]
    assert 0 < one["dot"]["retrieval"]["t2i_R@1"] < 100
    for name, file in (("dot", EMBEDDINGS_FILE), ("distance", SCORES_FILE)):
        a, b = _arrays(single / name / file), _arrays(double / name / file)
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a), name
