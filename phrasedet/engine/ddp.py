"""Multi-process training on CPU (gloo): Detectron2's ``create_ddp_model`` always passes
``device_ids=[local_rank]``, which ``DistributedDataParallel`` rejects for CPU modules."""
import contextlib

import detectron2.engine.defaults as d2_defaults
import torch.distributed as dist
from detectron2.utils import comm

__all__ = ["create_ddp_model", "cpu_safe_ddp", "finish_distributed"]

_d2_create_ddp_model = d2_defaults.create_ddp_model


def create_ddp_model(model, **kwargs):
    """``detectron2.engine.create_ddp_model``, with ``device_ids=None`` for a model on the CPU."""
    if next(model.parameters()).device.type == "cpu":
        kwargs.setdefault("device_ids", None)
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
    """End a process's part in a multi-process run: wait for every process, then close the
    process group. Detectron2's ``launch`` returns without either, and a gloo process group
    torn down at interpreter exit while a peer still talks can abort the process
    ("terminate called without an active exception")."""
    if comm.get_world_size() > 1:
        comm.synchronize()
        dist.destroy_process_group()
