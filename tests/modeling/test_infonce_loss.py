"""CLIP's symmetric InfoNCE loss (phrasedet/modeling/losses/infonce.py): hand cases, CLIP's own
formula, several captions per image, the learnable and clamped temperature, and the config."""
import math

import pytest
import torch
import torch.nn.functional as F

from phrasedet.modeling.losses import InfoNCELoss


def _total(out):
    return out["loss_infonce_image"] + out["loss_infonce_caption"]


def test_two_pairs_by_hand():
    # two orthogonal images, captions at cosines (0.6, 0.8) with image 0 and (0, 1) with image 1
    images = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    captions = torch.tensor([[0.6, 0.8], [0.0, 1.0]])
    loss = InfoNCELoss(temperature=0.5, learn_temperature=False)  # scale 2: logits [[1.2, 0], [1.6, 2]]
    out = loss(images, captions, torch.tensor([0, 1]), torch.tensor([10, 11]))
    ce_image = (-(1.2 - math.log(math.exp(1.2) + 1)) - (2 - math.log(math.exp(1.6) + math.exp(2)))) / 2
    ce_caption = (-(1.2 - math.log(math.exp(1.2) + math.exp(1.6))) - (2 - math.log(1 + math.exp(2)))) / 2
    assert out["loss_infonce_image"].item() == pytest.approx(ce_image / 2, rel=1e-6)
    assert out["loss_infonce_caption"].item() == pytest.approx(ce_caption / 2, rel=1e-6)


def test_one_caption_per_image_is_clips_loss():
    g = torch.Generator().manual_seed(0)
    images = F.normalize(torch.randn(6, 4, generator=g), dim=1)
    captions = F.normalize(torch.randn(6, 4, generator=g), dim=1)
    loss = InfoNCELoss()
    logits = images @ captions.t() / 0.07
    labels = torch.arange(6)
    clip = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
    assert _total(loss(images, captions, labels, torch.arange(6) + 100)).item() == pytest.approx(clip.item(), rel=1e-6)


def test_other_positives_are_neither_targets_nor_negatives():
    """Image 0 has captions 0 and 1; images 1 and 2 are the same dataset image (key 7), caption 2 is image 1's."""
    g = torch.Generator().manual_seed(1)
    images = F.normalize(torch.randn(3, 4, generator=g), dim=1)
    captions = F.normalize(torch.randn(3, 4, generator=g), dim=1)
    out = InfoNCELoss(temperature=1.0, learn_temperature=False)(images, captions, torch.tensor([0, 0, 1]),
                                                                  torch.tensor([5, 7, 7]))
    s = images @ captions.t()

    def ce(row, target, kept):
        return -(row[target] - torch.logsumexp(row[kept], 0))

    image_terms = [ce(s[0], 0, [0, 2]), ce(s[0], 1, [1, 2]), ce(s[1], 2, [0, 1, 2])]
    caption_terms = [ce(s[:, 0], 0, [0, 1, 2]), ce(s[:, 1], 0, [0, 1, 2]), ce(s[:, 2], 1, [0, 1])]
    assert out["loss_infonce_image"].item() == pytest.approx(sum(image_terms).item() / 6, rel=1e-6)
    assert out["loss_infonce_caption"].item() == pytest.approx(sum(caption_terms).item() / 6, rel=1e-6)


def test_the_temperature_learns_and_is_clamped():
    images = torch.eye(3)
    captions = F.normalize(torch.eye(3) + 0.1, dim=1)
    loss = InfoNCELoss(temperature=0.07)
    assert loss.log_scale.requires_grad and loss.scale.item() == pytest.approx(1 / 0.07)
    _total(loss(images, captions, torch.arange(3), torch.arange(3))).backward()
    assert loss.log_scale.grad is not None and loss.log_scale.grad.item() < 0  # sharper logits help here
    with torch.no_grad():
        loss.log_scale.fill_(10.0)
    assert loss.scale.item() == pytest.approx(100.0)
    with torch.no_grad():
        loss.log_scale.fill_(-1.0)
    assert loss.scale.item() == pytest.approx(1.0)
    fixed = InfoNCELoss(temperature=0.2, learn_temperature=False, max_scale=5.0)
    assert not fixed.log_scale.requires_grad and fixed.scale.item() == pytest.approx(5.0)


@pytest.mark.parametrize("temperature, max_scale", [(0.0, 100.0), (-0.1, 100.0), (0.005, 100.0)])
def test_bad_temperature(temperature, max_scale):
    with pytest.raises(ValueError, match=rf"need 0 < temperature and 1 / temperature <= max_scale, got temperature "
                                         rf"{temperature} and max_scale {max_scale}"):
        InfoNCELoss(temperature=temperature, max_scale=max_scale)


def test_config_builds_it_and_keeps_the_cosine():
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config
    from phrasedet.modeling.meta_arch.image_text_embedding import _check, build_loss

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.MODEL.RETRIEVAL.LOSS.TYPE = "infonce"
    cfg.MODEL.RETRIEVAL.LOSS.TEMPERATURE = 0.1
    cfg.MODEL.RETRIEVAL.LOSS.LEARN_TEMPERATURE = False
    cfg.MODEL.RETRIEVAL.LOSS.GATHER_NEGATIVES = False
    loss = build_loss(cfg)
    assert isinstance(loss, InfoNCELoss) and loss.scale.item() == pytest.approx(10.0) and not loss.gather
    _check(cfg)
    cfg.MODEL.RETRIEVAL.SCORE = "similarity_network"
    with pytest.raises(ValueError, match="'cosine' with 'ranking' or 'infonce'; got SCORE 'similarity_network' "
                                         "with LOSS.TYPE 'infonce'"):
        _check(cfg)
