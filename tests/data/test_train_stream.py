"""The resumable training stream (phrasedet/data/train_stream.py): batches depend only on the
seed and the batch number, whatever the start point or the number of workers."""
import random

import numpy as np
import pytest
import torch

from phrasedet.data.train_stream import (ResumableTrainStream, aspect_ratio_buckets, build_resumable_train_loader,
                                         index_batches, seeded_rngs)


def _take(gen, n):
    return [next(gen) for _ in range(n)]


def test_batches_are_epochs_of_the_seeded_permutation_split_by_rank():
    g = torch.Generator()
    g.manual_seed(3)
    stream = torch.randperm(5, generator=g).tolist() + torch.randperm(5, generator=g).tolist()
    batches = _take(index_batches(5, 2, seed=3), 5)
    assert [index for batch in batches for _, index in batch] == stream
    assert [position for batch in batches for position, _ in batch] == list(range(10))
    rank1 = _take(index_batches(5, 2, seed=3, rank=1, world_size=2), 2)
    assert [index for batch in rank1 for _, index in batch] == stream[1::2][:4]


def test_aspect_ratio_grouping_fills_two_buckets_as_detectron2_does():
    records = [dict(width=20, height=10), dict(width=10, height=20), dict(width=10, height=10)]
    buckets = aspect_ratio_buckets(records)
    assert buckets == [0, 1, 1]  # square images go with the tall ones (w > h is bucket 0)
    for batch in _take(index_batches(3, 2, seed=0, buckets=buckets), 6):
        assert len({buckets[i] for _, i in batch}) == 1
    with pytest.raises(ValueError, match="record 0 .*ASPECT_RATIO_GROUPING"):
        aspect_ratio_buckets([dict(file_name="a.jpg")])


def _mapper(record):
    """A mapper with random draws from all three RNGs."""
    return (record, random.random(), float(np.random.rand()), float(torch.rand(())))


def _batches(loader, n):
    it = iter(loader)
    return [next(it) for _ in range(n)]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stream_started_at_batch_s_continues_the_full_stream_with_any_number_of_workers(workers):
    records = list(range(7))
    full = _batches(build_resumable_train_loader(records, _mapper, 3, seed=5, aspect_ratio_grouping=False), 6)
    loader = build_resumable_train_loader(records, _mapper, 3, seed=5, num_workers=workers, aspect_ratio_grouping=False)
    loader.dataset.start_at(4)
    assert _batches(loader, 2) == full[4:6]
    assert len({draw for batch in full for _, draw, _, _ in batch}) == 18  # each image mapped with its own draws


def test_mapping_does_not_disturb_the_callers_rngs_and_none_is_refused():
    random.seed(1)
    expected = random.random()
    random.seed(1)
    with seeded_rngs(7):
        random.random()
    assert random.random() == expected
    stream = ResumableTrainStream([1, 2], lambda r: None, 1, seed=0)
    with pytest.raises(ValueError, match="returned None for record"):
        next(iter(stream))
