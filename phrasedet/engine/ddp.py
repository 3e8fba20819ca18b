"""Multi-process training on CPU (gloo): Detectron2's ``create_ddp_model`` always passes
``device_ids=[local_rank]``, which ``DistributedDataParallel`` rejects for CPU modules."""
import contextlib

import detectron2.engine.defaults as d2_defaults

__all__ = ["create_ddp_model", "cpu_safe_ddp"]

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


