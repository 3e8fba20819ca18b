"""With several processes, the ranking loss over the gathered global batch gives each parameter
exactly the gradient of one process training on that global batch (after DDP's averaging)."""
import json
import threading
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from detectron2.engine import launch
from detectron2.utils import comm
from torch import nn

from phrasedet.engine import finish_distributed
from phrasedet.modeling.losses import InfoNCELoss, RankingLoss, all_gather_with_grad, gather_batch
from phrasedet.modeling.losses import gather as gather_module

IMAGES, CAPTIONS = 8, 10  # global batch; process r holds images 4r..4r+3 and their captions
OWNER = [0, 0, 1, 2, 3, 4, 4, 5, 6, 7]  # images 0 and 4 have two captions, so the processes hold 5 captions each
KEYS = [0, 1, 2, 3, 4, 5, 1, 7]  # images 1 and 6 are the same dataset image, in different processes


def _data():
    g = torch.Generator().manual_seed(3)
    return torch.randn(IMAGES, 6, generator=g), torch.randn(CAPTIONS, 5, generator=g)


def _models():
    torch.manual_seed(0)
    return nn.Linear(6, 4), nn.Linear(5, 4)


def _loss(negatives, img_model, cap_model, x, y, owner, keys, gather):
    """The ranking loss with ``negatives``, or ("infonce") CLIP's InfoNCE with a learnable temperature."""
    if negatives == "infonce":
        loss = InfoNCELoss(temperature=0.5, gather=gather)
    else:
        loss = RankingLoss(negatives=negatives, topk=3, margin=0.3, neighbourhood_weight=0.5, gather=gather)
    img = nn.functional.normalize(img_model(x), dim=1)
    cap = nn.functional.normalize(cap_model(y), dim=1)
    return sum(loss(img, cap, torch.as_tensor(owner), torch.as_tensor(keys)).values())


def _gradients(img_model, cap_model):
    return [p.grad.tolist() for m in (img_model, cap_model) for p in m.parameters()]


def _one_process(negatives):
    img_model, cap_model = _models()
    x, y = _data()
    loss = _loss(negatives, img_model, cap_model, x, y, OWNER, KEYS, gather=False)
    loss.backward()
    return loss.item(), _gradients(img_model, cap_model)


def _worker(negatives, path):
    img_model, cap_model = _models()
    ddp = [nn.parallel.DistributedDataParallel(m) for m in (img_model, cap_model)]
    x, y = _data()
    rank = comm.get_rank()
    images = list(range(4 * rank, 4 * rank + 4))
    captions = [c for c, o in enumerate(OWNER) if o in images]
    owner = [OWNER[c] - 4 * rank for c in captions]
    loss = _loss(negatives, ddp[0], ddp[1], x[images], y[captions], owner, [KEYS[i] for i in images], gather=True)
    loss.backward()
    if comm.is_main_process():
        with open(path, "w") as f:
            json.dump({"loss": loss.item(), "grads": _gradients(img_model, cap_model)}, f)
    finish_distributed()


@pytest.mark.parametrize("negatives", ["hardest", "topk", "infonce"])
def test_two_processes_equal_one_process_on_the_global_batch(tmp_path, negatives):
    loss, grads = _one_process(negatives)
    path = tmp_path / "two.json"
    launch(_worker, 2, dist_url="auto", args=(negatives, str(path)))
    two = json.loads(path.read_text())
    assert two["loss"] == pytest.approx(loss, rel=1e-6)
    for a, b in zip(grads, two["grads"]):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-6)
    assert any(abs(v) > 1e-4 for g in grads for v in torch.tensor(g).flatten().tolist())  # the loss does train


# --- In-process tests: the contract of gather.py with W ranks simulated as threads of this process ---
#
# The test above runs real processes, which mutation testing cannot follow. Below, each rank is a thread and
# ``comm`` / ``dist`` in phrasedet.modeling.losses.gather are replaced by a tiny world whose all_gather and
# all_reduce exchange tensors through a barrier and refuse what a real backend refuses (a list of the wrong
# length, tensors of another shape, dtype or device, a reduction other than the sum that is asked for).


class _ThreadWorld:
    """``size`` ranks, one thread each, exchanging tensors as gloo would."""

    def __init__(self, size):
        self.size = size
        self._barrier = threading.Barrier(size, timeout=20)
        self._slots = [None] * size
        self._rank = threading.local()

    def get_world_size(self):
        return self.size

    def get_rank(self):
        return self._rank.value

    def _exchange(self, tensor):
        self._slots[self.get_rank()] = tensor.detach().clone()
        self._barrier.wait()
        slots = list(self._slots)
        self._barrier.wait()  # every rank has read the slots before they are written again
        return slots

    def all_gather(self, tensor_list, tensor):
        if len(tensor_list) != self.size:
            raise RuntimeError(f"all_gather needs {self.size} output tensors, got {len(tensor_list)}")
        slots = self._exchange(tensor)
        for out, sent in zip(tensor_list, slots):
            if (out.shape, out.dtype, out.device) != (sent.shape, sent.dtype, sent.device):
                raise RuntimeError(f"all_gather: output {out.shape} {out.dtype} {out.device}, "
                                   f"sent {sent.shape} {sent.dtype} {sent.device}")
            out.copy_(sent)

    def all_reduce(self, tensor, op):
        if op != dist.ReduceOp.SUM:
            raise RuntimeError(f"this world only sums, got {op}")
        slots = self._exchange(tensor)
        tensor.copy_(torch.stack(slots).sum(0))

    def run(self, fn, *per_rank_args):
        """fn(*per_rank_args[r]) on rank r for every r; the list of results (re-raises a rank's error)."""
        results, errors = [None] * self.size, []

        def body(rank):
            self._rank.value = rank
            try:
                results[rank] = fn(*per_rank_args[rank])
            except BaseException as e:  # noqa: BLE001 - handed to the test thread below
                errors.append(e)
                self._barrier.abort()  # the other ranks stop waiting for this one

        threads = [threading.Thread(target=body, args=(r,)) for r in range(self.size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return results


@pytest.fixture
def world(monkeypatch):
    """Installs a thread world in gather.py; ``world(size)`` returns it."""

    def make(size):
        w = _ThreadWorld(size)
        monkeypatch.setattr(gather_module, "comm", w)
        monkeypatch.setattr(gather_module, "dist", SimpleNamespace(all_gather=w.all_gather, all_reduce=w.all_reduce,
                                                                    ReduceOp=dist.ReduceOp))
        return w

    return make


def _rows(*values):
    """A [len(values), 3] float tensor whose row i is (v_i, 10 v_i, 100 v_i), easy to recognise."""
    return torch.tensor([[v, 10.0 * v, 100.0 * v] for v in values])


def test_all_gather_with_grad_concatenates_in_rank_order_and_sums_the_gradient_of_the_local_slice(world):
    w = world(3)
    local = [_rows(1.0, 2.0), _rows(3.0), _rows(4.0, 5.0, 6.0)]  # sizes differ: 2, 1, 3 rows
    # every rank computes the loss sum(weight * gathered) with a weight of its own: rank r weighs row j by (r + 1) j
    weights = [(r + 1) * torch.arange(6.0)[:, None].expand(6, 3) for r in range(3)]

    def step(x, weight):
        x = x.clone().requires_grad_(True)
        out = all_gather_with_grad(x)
        (out * weight).sum().backward()
        return out.detach(), x.grad

    results = w.run(step, *zip(local, weights))
    for out, _ in results:  # every rank holds the global batch, rank 0's rows first
        assert out.tolist() == _rows(1.0, 2.0, 3.0, 4.0, 5.0, 6.0).tolist()
    # the gradient of global row j is summed over the ranks: (1 + 2 + 3) j; each rank gets its own rows back
    grads = [g[:, 0].tolist() for _, g in results]
    assert grads == [[0.0, 6.0], [12.0], [18.0, 24.0, 30.0]]
    assert all(bool((g == g[:, :1]).all()) for _, g in results)  # and every column of a row alike


def test_gather_batch_reindexes_owners_into_the_global_images_and_gathers_keys_without_gradient(world):
    w = world(2)
    # rank 0: images 0, 1 (keys 7, 8), captions of images 1, 0, 1; rank 1: image 0 (key 7, the same dataset
    # image as rank 0's first) with captions 0, 0
    ranks = [(_rows(1.0, 2.0), _rows(0.1, 0.2, 0.3), torch.tensor([1, 0, 1]), torch.tensor([7, 8])),
             (_rows(3.0), _rows(0.4, 0.5), torch.tensor([0, 0]), torch.tensor([7]))]

    def step(images, captions, owner, keys):
        images, captions = images.clone().requires_grad_(True), captions.clone().requires_grad_(True)
        return gather_batch(images, captions, owner, keys)

    for images, captions, owner, keys in w.run(step, *ranks):
        assert images.tolist() == _rows(1.0, 2.0, 3.0).tolist()
        assert captions.tolist() == _rows(0.1, 0.2, 0.3, 0.4, 0.5).tolist()
        assert owner.tolist() == [1, 0, 1, 2, 2]  # rank 1's image 0 is global image 2
        assert keys.tolist() == [7, 8, 7]
        assert images.requires_grad and captions.requires_grad
        assert not owner.requires_grad and not keys.requires_grad


def test_the_owner_offset_counts_images_not_their_width(world):
    """Rank 1's owners are shifted by rank 0's number of images (2), whatever the embedding width (3)."""
    w = world(2)
    images, captions = [_rows(1.0, 2.0), _rows(3.0, 4.0)], [_rows(0.5), _rows(0.6)]
    out = w.run(gather_batch, (images[0], captions[0], torch.tensor([1]), torch.tensor([0, 1])),
                (images[1], captions[1], torch.tensor([1]), torch.tensor([2, 3])))
    assert [o[2].tolist() for o in out] == [[1, 3], [1, 3]]


def test_gathered_tensors_stay_on_the_device_of_the_inputs(world):
    """Every tensor the gather creates follows its input's device, not the default device (on GPUs, NCCL
    only takes CUDA tensors): with the default device set to "meta", CPU inputs still gather on the CPU."""
    w = world(2)

    def step(x, owner):
        with torch.device("meta"):
            x = x.clone().requires_grad_(True)
            images, _, owner, _ = gather_batch(x, x, owner, owner)
            all_gather_with_grad(x).sum().backward()
        return images.device, owner.tolist(), x.grad.tolist()

    out = w.run(step, (_rows(1.0), torch.tensor([0])), (_rows(2.0), torch.tensor([0])))
    assert out == [(torch.device("cpu"), [0, 1], [[2.0, 2.0, 2.0]])] * 2


def test_one_process_gets_its_own_tensors_back(world):
    """A world of one: the inputs themselves, no copy and no collective."""
    world(1)
    images, captions, owner, keys = _rows(1.0), _rows(2.0, 3.0), torch.tensor([0, 0]), torch.tensor([5])
    out = gather_batch(images, captions, owner, keys)
    assert all(a is b for a, b in zip(out, (images, captions, owner, keys)))
    assert all_gather_with_grad(images) is images


@pytest.fixture
def gloo_group(tmp_path):
    """A real one-process gloo process group, destroyed after the test."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.usefixtures("gloo_group")
def test_with_a_real_one_process_group_the_inputs_come_back_and_the_collectives_are_accepted():
    """Detectron2's comm sees the real group (world size 1): the inputs come back unchanged; the collectives
    gather.py issues are accepted by the real gloo backend, for long and float tensors."""
    assert comm.get_world_size() == 1
    images, captions, owner, keys = _rows(1.0), _rows(2.0, 3.0), torch.tensor([0, 0]), torch.tensor([5])
    assert all(a is b for a, b in zip(gather_batch(images, captions, owner, keys), (images, captions, owner, keys)))
    assert all_gather_with_grad(images) is images
    assert gather_module._AllGather.apply(owner).tolist() == [0, 0]
    x = _rows(1.0, 2.0).requires_grad_(True)
    (gather_module._AllGather.apply(x) * torch.tensor([[1.0], [2.0]])).sum().backward()
    assert x.grad.tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
