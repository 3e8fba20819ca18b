"""--resume continues the run it interrupted (phrasedet/engine/exact_resume.py and
phrasedet/data/train_stream.py): a tiny phrase-detection run killed between two checkpoints and
resumed ends with the losses, weights and metrics.json of the uninterrupted run."""
import json
import os

import pytest
import torch
from detectron2.config import get_cfg
from detectron2.engine import HookBase
from detectron2.utils.env import seed_all_rng

from phrasedet.config import add_phrasedet_config
from phrasedet.engine import PhrasedetTrainer
from phrasedet.engine.exact_resume import trim_metrics_file

ROOT = os.path.join(os.path.dirname(__file__), "..")
TINY = ["SOLVER.IMS_PER_BATCH", 2, "SOLVER.MAX_ITER", 6, "SOLVER.CHECKPOINT_PERIOD", 2, "SOLVER.STEPS", (3,),
        "SOLVER.WARMUP_ITERS", 2, "DATALOADER.NUM_WORKERS", 1, "DATASETS.TEST", (),
        "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1, "PHRASEDET.TEXT.WORD2VEC_DIM", 16]


class _Kill(HookBase):
    """Raises after iteration ``iteration`` (its checkpoint, if any, is written first)."""

    def __init__(self, iteration):
        self.iteration = iteration

    def after_step(self):
        if self.trainer.iter == self.iteration:
            raise KeyboardInterrupt("killed")


def _train(out, resume=False, kill_after=None):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(ROOT, "configs", "qa_rcnn.yaml"))
    cfg.merge_from_list(TINY + ["OUTPUT_DIR", str(out)])
    cfg.freeze()
    seed_all_rng(cfg.SEED)  # as tools/train_net.py's default_setup does, before the model is built
    trainer = PhrasedetTrainer(cfg)
    if kill_after is not None:
        trainer.register_hooks([_Kill(kill_after)])
    trainer.resume_or_load(resume=resume)
    try:
        trainer.train()
    except KeyboardInterrupt:
        pass
    losses = {it: v for v, it in trainer.storage.history("total_loss").values()}
    return trainer, losses


def _metrics(out):
    with open(os.path.join(out, "metrics.json")) as f:
        return [json.loads(line) for line in f]


@pytest.mark.usefixtures("builtin_root")
def test_a_run_killed_between_checkpoints_and_resumed_equals_the_uninterrupted_run(tmp_path):
    full, full_losses = _train(tmp_path / "full")
    _, killed_losses = _train(tmp_path / "resumed", kill_after=4)  # checkpoints after iterations 1 and 3
    assert sorted(killed_losses) == [0, 1, 2, 3, 4]
    resumed, resumed_losses = _train(tmp_path / "resumed", resume=True)
    assert resumed.start_iter == 4
    assert sorted(resumed_losses) == [4, 5]
    for it in (4, 5):  # the redone iteration 4 and the one after: the same data, draws and weights, bit for bit
        assert resumed_losses[it] == full_losses[it]
    a, b = full.model.state_dict(), resumed.model.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(b[key], a[key]), key
    # one record per logged iteration: the killed run's record of iteration 4 was dropped
    assert [r["iteration"] for r in _metrics(tmp_path / "resumed")] == [r["iteration"] for r in _metrics(tmp_path / "full")]


def test_trim_metrics_file_keeps_iterations_before_the_resume_point(tmp_path):
    path = tmp_path / "metrics.json"
    lines = ['{"iteration": 19, "loss": 1.0}', '{"iteration": 39, "loss": 0.5}', "not json", '{"iteration": 40}',
             '{"note": "no iteration"}']
    path.write_text("\n".join(lines) + "\n")
    assert trim_metrics_file(str(path), 39) == 2
    assert path.read_text().splitlines() == [lines[0], "not json", lines[4]]
    assert trim_metrics_file(str(path), 39) == 0
    assert trim_metrics_file(str(tmp_path / "absent.json"), 0) == 0
