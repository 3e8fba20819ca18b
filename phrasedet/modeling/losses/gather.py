"""A training batch gathered from every process, with gradients flowing back to the local part.

With several processes, a loss over in-batch negatives should see the whole global batch. Each
process gathers every process's embeddings and computes the *same* loss L over the global batch;
:func:`all_gather_with_grad` sums, in backward, the gradients every process computed for each
slice and hands each process the gradient of its own slice, W * dL/de_local. DistributedDataParallel
then averages the parameter gradients over the W processes, which gives exactly dL/dtheta of one
process training on the global batch.
"""
import torch
import torch.distributed as dist
from detectron2.utils import comm

__all__ = ["all_gather_with_grad", "gather_batch"]


def _sizes(n: int, device) -> list:
    sizes = [torch.zeros(1, dtype=torch.long, device=device) for _ in range(comm.get_world_size())]
    dist.all_gather(sizes, torch.tensor([n], dtype=torch.long, device=device))
    return [int(s.item()) for s in sizes]


class _AllGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        sizes = _sizes(x.shape[0], x.device)
        padded = x.new_zeros((max(sizes),) + tuple(x.shape[1:]))
        padded[: x.shape[0]] = x
        parts = [torch.empty_like(padded) for _ in sizes]
        dist.all_gather(parts, padded.contiguous())
        ctx.sizes, ctx.rank = sizes, comm.get_rank()
        return torch.cat([p[:n] for p, n in zip(parts, sizes)])

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        start = sum(ctx.sizes[: ctx.rank])
        return grad[start:start + ctx.sizes[ctx.rank]]


def all_gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """[n_r, ...] on process r -> [sum_r n_r, ...] on every process, in rank order (sizes may
    differ); backward returns the summed gradient of the local slice. One process: ``x``."""
    if comm.get_world_size() <= 1:
        return x
    return _AllGather.apply(x)


def gather_batch(images, captions, owner, image_keys):
    """The global batch of every process.

    Args:
        images: [I_r, D] image embeddings of this process.
        captions: [C_r, D] caption embeddings.
        owner: [C_r] long, the row of each caption's image in ``images``.
        image_keys: [I_r] long, an identifier of each image (equal for the same dataset image).

    Returns:
        The same four tensors for the whole global batch (rows in rank order, ``owner``
        re-indexed into the gathered images); only the embeddings carry gradients.
    """
    if comm.get_world_size() <= 1:
        return images, captions, owner, image_keys
    with torch.no_grad():
        counts = _sizes(images.shape[0], images.device)
        offset = sum(counts[: comm.get_rank()])
        all_owner = _AllGather.apply(owner + offset)
        all_keys = _AllGather.apply(image_keys)
    return all_gather_with_grad(images), all_gather_with_grad(captions), all_owner, all_keys
