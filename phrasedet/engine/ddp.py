"""Multi-process training on CPU (gloo): Detectron2's ``create_ddp_model`` always passes
``device_ids=[local_rank]``, which ``DistributedDataParallel`` rejects for CPU modules."""
import contextlib
import logging
import multiprocessing
import os
import sys

import detectron2.engine.defaults as d2_defaults
import torch.distributed as dist
from detectron2.utils import comm

__all__ = ["cpu_safe_ddp", "create_ddp_model", "finish_distributed"]

_d2_create_ddp_model = d2_defaults.create_ddp_model


def create_ddp_model(model, **kwargs):
    """``detectron2.engine.create_ddp_model``, with ``device_ids=None`` for a model on the CPU and
    ``find_unused_parameters`` when the model says some parameters get no gradient for a while
    (``model.needs_unused_parameters``: a backbone frozen until an iteration)."""
    if next(model.parameters()).device.type == "cpu":
        kwargs.setdefault("device_ids", None)
    if getattr(model, "needs_unused_parameters", False):
        kwargs.setdefault("find_unused_parameters", True)
    return _d2_create_ddp_model(model, **kwargs)


@contextlib.contextmanager
def cpu_safe_ddp():
    """Within the block, ``DefaultTrainer`` wraps CPU models with :func:`create_ddp_model`."""
    d2_defaults.create_ddp_model = create_ddp_model
    try:
        yield
    finally:
        d2_defaults.create_ddp_model = _d2_create_ddp_model


def finish_distributed():
    """End a process's part in a multi-process run: wait for every process, close the process
    group, then leave at once.

    Detectron2's ``launch`` returns from its spawned workers without a barrier or a
    ``destroy_process_group``. At interpreter teardown gloo's C++ threads can then still hold
    tensors whose release needs the (dying) interpreter, and the worker aborts with "terminate
    called without an active exception" (SIGABRT) after its work is done; it was seen on the
    first, cold run of a fresh clone even with the group destroyed. So a spawned worker flushes
    its logs and streams and ends with ``os._exit(0)``, skipping that teardown. A single
    process, or the launching process itself, returns normally.
    """
    if comm.get_world_size() <= 1:
        return
    comm.synchronize()
    dist.destroy_process_group()
    if multiprocessing.parent_process() is not None:  # a worker spawned by ``launch``
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
