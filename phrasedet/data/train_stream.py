"""The training data loader of every task family, resumable exactly.

Detectron2's training loader draws an endless stream of images from a ``TrainingSampler`` and
maps each with the RNG of the worker that happens to load it. A run continued with ``--resume``
restarts both from scratch, so after the checkpoint it sees other images and other random draws
than the uninterrupted run. Here batch ``b`` of a process is a function of ``(seed, b)`` only:

- **order**: the images of epoch ``e`` are ``torch.randperm(N)`` of a generator seeded once with
  the seed (the sampler's rule); process ``r`` of ``W`` takes stream positions ``r, r + W, ...``;
  with aspect-ratio grouping, images wider than tall and the others fill two buckets and a batch is
  emitted when one is full (Detectron2's ``AspectRatioGroupedDataset`` rule, applied to record
  sizes, so it can be replayed without loading an image);
- **random draws**: the mapper of the image at stream position ``p`` runs with Python's, numpy's
  and torch's RNGs seeded from ``(seed, p)``, and the caller's RNG states are restored after;
- **workers**: worker ``w`` of ``K`` maps whole batches ``start + w, start + w + K, ...``, and
  PyTorch's loader yields workers' batches in turn, so batches arrive in order for any ``K``.

Resuming at iteration ``s`` (:meth:`ResumableTrainStream.start_at`) replays the index stream up
to batch ``s`` (integers only, no image read) and maps from there.
"""
import contextlib
import logging
import random

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

__all__ = ["ResumableTrainStream", "derived_seed", "seeded_rngs", "index_batches"]

logger = logging.getLogger(__name__)


def derived_seed(*keys) -> int:
    """A 32-bit seed that depends only on the integers ``keys`` (numpy's ``SeedSequence``), e.g.
    ``derived_seed(seed, purpose, position)``: neighbouring keys give unrelated streams."""
    return int(np.random.SeedSequence([int(k) for k in keys]).generate_state(1)[0])


@contextlib.contextmanager
def seeded_rngs(seed: int):
    """Run the block with Python's, numpy's and torch's (CPU) RNGs seeded with ``seed``; their
    previous states are restored afterwards, so the caller's stream is not disturbed."""
    states = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    random.seed(seed)
    np.random.seed(seed)
    torch.default_generator.manual_seed(seed)  # CPU only: torch.manual_seed would reseed CUDA too
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.random.set_rng_state(states[2])


def _positions(num_records: int, seed: int, rank: int, world_size: int):
    """Endless (stream position, record index) pairs of process ``rank``: epochs of
    ``torch.randperm`` from one generator seeded with ``seed``, every ``world_size``-th taken."""
    g = torch.Generator()
    g.manual_seed(seed)
    position = 0
    while True:
        for index in torch.randperm(num_records, generator=g).tolist():
            if position % world_size == rank:
                yield position, index
            position += 1


def index_batches(num_records: int, batch_size: int, seed: int, rank: int = 0, world_size: int = 1, buckets=None):
    """Endless batches of (stream position, record index) of process ``rank``.

    Args:
        buckets: ``None`` (batches of consecutive images), or the aspect-ratio bucket (0 or 1) of
            each record: a batch is the first ``batch_size`` images of one bucket, emitted when full.
    """
    pending = [[], []]
    for item in _positions(num_records, seed, rank, world_size):
        bucket = pending[0 if buckets is None else buckets[item[1]]]
        bucket.append(item)
        if len(bucket) == batch_size:
            yield list(bucket)
            bucket.clear()


def aspect_ratio_buckets(records) -> list:
    """Detectron2's bucket of each record: 0 if wider than tall, else 1 (record sizes)."""
    buckets = []
    for k, r in enumerate(records):
        if "width" not in r or "height" not in r:
            raise ValueError(f"aspect-ratio grouping needs 'width' and 'height' in every record; record {k} "
                             f"({r.get('file_name', r.get('image_id'))}) has neither (set DATALOADER.ASPECT_RATIO_GROUPING False)")
        buckets.append(0 if r["width"] > r["height"] else 1)
    return buckets


class ResumableTrainStream(IterableDataset):
    """Endless batches (lists of mapped dicts) of one process; batch ``b`` depends only on
    ``(seed, b)`` (module docstring).

    Args:
        records: the training records (a list or Detectron2 ``DatasetFromList``), indexable.
        mapper: record dict -> model input dict (must not return ``None``).
        batch_size: images per batch of this process.
        seed: the run's seed (``SEED``; the same on every process).
        buckets: per-record aspect-ratio bucket (:func:`aspect_ratio_buckets`) or ``None``.
        rank, world_size: this process among the training processes.
    """

    def __init__(self, records, mapper, batch_size: int, seed: int, buckets=None, rank: int = 0, world_size: int = 1):
        if len(records) == 0:
            raise ValueError("no training records")
        self.records, self.mapper, self.batch_size = records, mapper, int(batch_size)
        self.seed, self.buckets, self.rank, self.world_size = int(seed), buckets, int(rank), int(world_size)
        self.start = 0

    def start_at(self, iteration: int) -> None:
        """Make the next ``iter()`` begin with batch ``iteration`` (set before iterating)."""
        self.start = int(iteration)

    def _map(self, position: int, index: int):
        with seeded_rngs(derived_seed(self.seed, position)):
            out = self.mapper(self.records[index])
        if out is None:
            raise ValueError(f"the training mapper returned None for record {index}; phrasedet's stream cannot "
                             "replace it (filter such records when loading)")
        return out

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        batches = index_batches(len(self.records), self.batch_size, self.seed, self.rank, self.world_size, self.buckets)
        for b, batch in enumerate(batches):
            if b >= self.start and (b - self.start) % workers == worker:
                yield [self._map(position, index) for position, index in batch]


def _identity(batch):
    return batch


def build_resumable_train_loader(records, mapper, batch_size: int, seed: int, num_workers: int = 0,
                                 aspect_ratio_grouping: bool = True, rank: int = 0, world_size: int = 1):
    """A ``torch.utils.data.DataLoader`` over a :class:`ResumableTrainStream` (its ``dataset``)."""
    from detectron2.data.common import DatasetFromList

    buckets = aspect_ratio_buckets(records) if aspect_ratio_grouping else None
    stream = ResumableTrainStream(DatasetFromList(list(records), copy=False), mapper, batch_size, seed, buckets, rank, world_size)
    # its own generator: iter() draws the workers' base seed from it, not from the global RNG, whose
    # stream would otherwise shift by one draw at the first iteration of every process
    generator = torch.Generator()
    generator.manual_seed(derived_seed(seed, rank))
    return torch.utils.data.DataLoader(stream, batch_size=None, num_workers=num_workers, collate_fn=_identity,
                                       generator=generator)
