"""What makes ``--resume`` continue the run it interrupted, with the resumable training stream of
:mod:`phrasedet.data.train_stream`:

- :class:`IterationSeedHook` seeds Python's, numpy's and torch's RNGs before every step from
  ``(SEED, iteration, rank)``, so the model's random draws (proposal sampling, dropout, negative
  phrases) at iteration ``i`` do not depend on how many iterations this process has run;
- :func:`trim_metrics_file` drops from ``metrics.json`` the records of iterations the resumed run
  will redo (those logged between the last checkpoint and the interruption), so the file keeps
  one record per iteration.

The optimizer, the learning-rate schedule and the iteration are in Detectron2's checkpoints
already. Exactness needs ``SEED >= 0``: with a negative seed every start draws a new one.
"""
import json
import logging
import os

from detectron2.engine import HookBase
from detectron2.utils import comm
from detectron2.utils.env import seed_all_rng

from phrasedet.data.train_stream import derived_seed

__all__ = ["IterationSeedHook", "trim_metrics_file", "MODEL_RNG_KEY"]

logger = logging.getLogger("phrasedet.engine")

#: Second key of the model's per-iteration seeds (the data stream uses (seed, position)).
MODEL_RNG_KEY = 1


class IterationSeedHook(HookBase):
    """Before each step, seed every RNG from ``(seed, MODEL_RNG_KEY, iteration, rank)``."""

    def __init__(self, seed: int):
        self.seed = int(seed)

    def before_step(self):
        seed_all_rng(derived_seed(self.seed, MODEL_RNG_KEY, self.trainer.iter, comm.get_rank()))


def trim_metrics_file(path: str, start_iter: int) -> int:
    """Keep in the JSON-lines file ``path`` only the records of iterations before ``start_iter``
    (lines that are not JSON objects with an ``iteration`` are kept). Returns how many were dropped."""
    if not os.path.isfile(path):
        return 0
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    kept = [line for line in lines if not _from_iteration(line, start_iter)]
    if len(kept) < len(lines):
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in kept))
        logger.info("%s: dropped the %d records of iterations >= %d, which the resumed run redoes",
                    path, len(lines) - len(kept), start_iter)
    return len(lines) - len(kept)


def _from_iteration(line: str, start_iter: int) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and isinstance(record.get("iteration"), int) and record["iteration"] >= start_iter
