"""With several processes, the ranking loss over the gathered global batch gives each parameter
exactly the gradient of one process training on that global batch (after DDP's averaging)."""
import json

import pytest
import torch
from detectron2.engine import launch
from detectron2.utils import comm
from torch import nn

from phrasedet.engine import finish_distributed
from phrasedet.modeling.losses import RankingLoss

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


@pytest.mark.parametrize("negatives", ["hardest", "topk"])
def test_two_processes_equal_one_process_on_the_global_batch(tmp_path, negatives):
    loss, grads = _one_process(negatives)
    path = tmp_path / "two.json"
    launch(_worker, 2, dist_url="auto", args=(negatives, str(path)))
    two = json.loads(path.read_text())
    assert two["loss"] == pytest.approx(loss, rel=1e-6)
    for a, b in zip(grads, two["grads"]):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-6)
    assert any(abs(v) > 1e-4 for g in grads for v in torch.tensor(g).flatten().tolist())  # the loss does train
