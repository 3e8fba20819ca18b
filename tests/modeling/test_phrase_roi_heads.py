"""Phrase-conditioned ROI heads on random features (after detectron2's tests/modeling/test_roi_heads.py)."""
import math

import pytest
import torch
from detectron2.config import get_cfg
from detectron2.layers import ShapeSpec
from detectron2.data import DatasetCatalog
from detectron2.structures import Boxes, ImageList, Instances, pairwise_iou
from detectron2.utils.events import EventStorage

from phrasedet.config import add_phrasedet_config
from phrasedet.modeling import PhraseROIHeads
from phrasedet.modeling.classifiers import PhraseTargets, QARCNNClassifier
from phrasedet.modeling.roi_heads import box_geometry
from phrasedet.modeling.roi_heads.phrase_sampling import phrase_iou, sample_regions_per_phrase

PHRASE_DIM = 8


def _cfg():
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.MODEL.ROI_HEADS.NAME = "PhraseROIHeads"
    cfg.MODEL.ROI_HEADS.IN_FEATURES = ["res4"]
    cfg.MODEL.ROI_BOX_HEAD.NAME = "FastRCNNConvFCHead"
    cfg.MODEL.ROI_BOX_HEAD.NUM_FC = 2
    cfg.MODEL.ROI_BOX_HEAD.FC_DIM = 32
    cfg.MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION = 4
    cfg.MODEL.PHRASE_ROI_HEADS.REGION_HEAD = "fc"
    cfg.MODEL.PHRASE_ROI_HEADS.ROIS_PER_PHRASE = 16
    cfg.MODEL.ROI_HEADS.POSITIVE_FRACTION = 0.25
    return cfg


def _heads(cfg):
    torch.manual_seed(0)
    return PhraseROIHeads(cfg, {"res4": ShapeSpec(channels=16, stride=16)}, phrase_dim=PHRASE_DIM)


def _case():
    torch.manual_seed(0)
    images = ImageList(torch.zeros(2, 3, 64, 64), [(64, 64), (48, 64)])
    features = {"res4": torch.rand(2, 16, 4, 4)}
    gt_boxes = [torch.tensor([[2.0, 2.0, 30.0, 30.0], [34.0, 10.0, 60.0, 40.0], [2.0, 2.0, 30.0, 30.0]]),
                torch.tensor([[10.0, 5.0, 40.0, 40.0]])]
    phrase_ids = [torch.tensor([0, 1, -1]), torch.tensor([0])]
    proposals, targets = [], []
    for size, boxes, ids in zip(images.image_sizes, gt_boxes, phrase_ids):
        p = Instances(size)
        jitter = torch.cat([boxes + torch.randn(len(boxes), 4) for _ in range(5)])
        rand = torch.rand(20, 2) * 30
        p.proposal_boxes = Boxes(torch.cat([jitter, torch.cat([rand, rand + 10 + torch.rand(20, 2) * 20], 1)]))
        p.objectness_logits = torch.zeros(len(p.proposal_boxes))
        proposals.append(p)
        t = Instances(size)
        t.gt_boxes, t.gt_phrase_ids, t.gt_classes = Boxes(boxes), ids, torch.zeros(len(boxes), dtype=torch.long)
        targets.append(t)
    phrase_feats = [torch.randn(2, PHRASE_DIM), torch.randn(1, PHRASE_DIM)]
    return images, features, proposals, targets, phrase_feats


def test_box_geometry_by_hand():
    g = box_geometry(torch.tensor([[10.0, 20.0, 30.0, 60.0]]), (100, 50))  # H=100, W=50
    torch.testing.assert_close(g, torch.tensor([[0.2, 0.2, 0.6, 0.6, 800 / 5000]]))


def test_per_phrase_iou_and_sampling():
    boxes = Boxes(torch.tensor([[0.0, 0, 10, 10], [20.0, 20, 30, 30], [0.0, 0, 10, 20]]))
    gt = Boxes(torch.tensor([[0.0, 0, 10, 10], [20.0, 20, 30, 30], [0.0, 0, 10, 10]]))
    iou, matched = phrase_iou(boxes, gt, torch.tensor([0, 1, -1]), 2)
    torch.testing.assert_close(iou, torch.tensor([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0]]))
    assert matched[0, 0].item() == 0 and matched[1, 1].item() == 1
    torch.manual_seed(0)
    sampled = sample_regions_per_phrase(iou, 2, 0.5, 0.5)
    # per phrase: 1 foreground at most (2 * 0.5), the rest background; region 0 is fg for phrase 0, bg for 1
    assert sampled.sum(1).tolist() == [2, 2]
    assert sampled[0, 0] and sampled[1, 1]



def test_phrase_iou_takes_the_best_of_several_instances_and_zero_without_one():
    # regions A [0, 0, 10, 10], B [20, 20, 30, 30], C [0, 0, 10, 20]; phrase 0 has two instances (A's and B's box),
    # phrase 1 none, phrase 2 C's box; the last instance (C's box again) is not asked about (-1).
    boxes = Boxes(torch.tensor([[0.0, 0, 10, 10], [20.0, 20, 30, 30], [0.0, 0, 10, 20]]))
    gt = Boxes(torch.tensor([[0.0, 0, 10, 10], [20.0, 20, 30, 30], [0.0, 0, 10, 20], [0.0, 0, 10, 20]]))
    iou, matched = phrase_iou(boxes, gt, torch.tensor([0, 0, 2, -1]), 3)
    # A vs C's box: 100 / 200 = 0.5
    assert iou.tolist() == [[1.0, 1.0, 0.5], [0.0, 0.0, 0.0], [0.5, 0.0, 1.0]]
    assert matched[0].tolist() == [0, 1, 0]  # the instance each region overlaps best
    assert matched[2, 0].item() == 2 and matched[2, 2].item() == 2  # never the unasked instance 3


def test_phrase_iou_outputs_stay_on_the_boxes_device():
    # meta tensors stand in for a GPU: ``matched`` on another device than the boxes would break
    # ``gt_boxes.tensor[matched[:, keep]]`` in the ROI heads
    boxes, gt = Boxes(torch.zeros(3, 4, device="meta")), Boxes(torch.zeros(2, 4, device="meta"))
    iou, matched = phrase_iou(boxes, gt, torch.tensor([0, 1]), 2)
    assert (iou.device.type, matched.device.type) == ("meta", "meta")
    assert iou.shape == matched.shape == (2, 3) and matched.dtype == torch.long

def test_qa_rcnn_loss_by_hand():
    cfg = _cfg()
    clf = QARCNNClassifier(cfg, region_dim=2, phrase_dim=2)
    with torch.no_grad():
        clf.weight_generator.weight.copy_(torch.eye(2))
        clf.weight_generator.bias.zero_()
        clf.bias.fill_(0.5)
    regions = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    phrases = torch.tensor([[1.0, 1.0]])
    targets = PhraseTargets(iou=torch.tensor([[0.7, 0.2]]), sampled=torch.tensor([[True, True]]))
    logits, losses = clf(regions, phrases, targets)
    torch.testing.assert_close(logits, torch.tensor([[1.5, 2.5]]))
    # region 0 positive (IoU 0.7 >= 0.5): -log sigmoid(1.5); region 1 negative: -log(1 - sigmoid(2.5))
    expected = (math.log1p(math.exp(-1.5)) + math.log1p(math.exp(2.5))) / 2
    assert losses["loss_phrase_cls"].item() == pytest.approx(expected, rel=1e-6)


def test_training_losses_are_finite_and_decrease_when_overfitting():
    cfg = _cfg()
    heads = _heads(cfg)
    heads.train()
    images, features, proposals, targets, phrase_feats = _case()
    opt = torch.optim.Adam(heads.parameters(), lr=0.01)
    history = []
    with EventStorage():
        for _ in range(40):
            torch.manual_seed(1)  # the same ROI sample each step
            _, losses = heads(images, features, proposals, targets, phrase_feats)
            assert set(losses) == {"loss_phrase_cls", "loss_phrase_box_reg"}
            total = sum(losses.values())
            assert torch.isfinite(total)
            history.append(total.item())
            opt.zero_grad()
            total.backward()
            opt.step()
    assert history[-1] < 0.3 * history[0]


def test_inference_shapes_topk_and_phrase_batches():
    cfg = _cfg()
    cfg.MODEL.PHRASE_ROI_HEADS.TEST_TOPK = 3
    cfg.MODEL.PHRASE_ROI_HEADS.TEST_PHRASE_BATCH = 4
    heads = _heads(cfg)
    heads.eval()
    images, features, proposals, _, _ = _case()
    vocab = torch.randn(10, PHRASE_DIM)
    results, _ = heads(images, features, proposals, None, [vocab, vocab])
    for (scores, boxes), size in zip(results, images.image_sizes):
        assert scores.shape == (10, 3) and boxes.shape == (10, 3, 4)
        assert torch.all(scores[:, :-1] >= scores[:, 1:])  # sorted per phrase
        assert torch.all((scores > 0) & (scores < 1))
        assert boxes[..., 2].max() <= size[1] and boxes[..., 3].max() <= size[0] and boxes.min() >= 0
    # scoring in batches of 4 equals scoring the 10 phrases one by one
    heads.test_phrase_batch = 1
    again, _ = heads(images, features, proposals, None, [vocab, vocab])
    torch.testing.assert_close(again[0][0], results[0][0])
    torch.testing.assert_close(again[0][1], results[0][1])


def test_phrase_side_work_is_done_once_per_shared_vocabulary():
    cfg = _cfg()
    heads = _heads(cfg)
    heads.eval()
    images, features, proposals, _, _ = _case()
    vocab = torch.randn(6, PHRASE_DIM)
    calls = []
    embed = heads.box_regressor.embed_phrases
    heads.box_regressor.embed_phrases = lambda v: calls.append(len(v)) or embed(v)
    shared, _ = heads(images, features, proposals, None, [vocab, vocab])
    assert calls == [6]  # two images, one vocabulary: embedded once
    separate, _ = heads(images, features, proposals, None, [vocab.clone(), vocab.clone()])
    assert calls == [6, 6, 6]  # different tensors: no reuse
    for (s1, b1), (s2, b2) in zip(shared, separate):
        torch.testing.assert_close(s1, s2)
        torch.testing.assert_close(b1, b2)
    heads.train()
    heads.eval()  # weights may have changed in between: recomputed
    heads(images, features, proposals, None, [vocab])
    assert calls == [6, 6, 6, 6]


def _cascade_heads(k):
    from phrasedet.modeling.cca import CCAProjection

    cfg = _cfg()
    cfg.MODEL.PHRASE_ROI_HEADS.CASCADE_TOPK = k
    cfg.MODEL.PHRASE_ROI_HEADS.TEST_TOPK = 2
    heads = _heads(cfg)
    g = torch.Generator().manual_seed(1)
    d_r, d = heads.region_features.output_dim, 4
    proj = CCAProjection(torch.zeros(d_r).numpy(), torch.zeros(PHRASE_DIM).numpy(), torch.randn(d_r, d, generator=g).numpy(),
                         torch.randn(PHRASE_DIM, d, generator=g).numpy(), torch.ones(d).numpy(), torch.ones(d).numpy())
    heads.shortlist.load_projection(proj)
    return heads.eval()


def test_cascade_scores_only_the_cca_shortlist():
    images, features, proposals, _, _ = _case()
    vocab = torch.randn(6, PHRASE_DIM)
    full = _cascade_heads(1000)  # k >= regions: every region is scored, as without the cascade
    plain = _heads(_cfg())
    plain.test_topk = 2
    plain.eval()
    expected, _ = plain(images, features, proposals, None, [vocab, vocab])
    got, _ = full(images, features, proposals, None, [vocab, vocab])
    torch.testing.assert_close(got[0][0], expected[0][0])

    heads = _cascade_heads(3)
    seen = []
    score = heads.classifier.score_encoded
    heads.classifier.score_encoded = lambda r, c, index=None: seen.append(index) or score(r, c, index)
    results, _ = heads(images, features, proposals, None, [vocab, vocab])
    scores, index = results[0][0], seen[0]  # image 0
    assert index.shape == (6, 3)  # 3 candidates per phrase
    # the candidates are the 3 best regions by the CCA cosine, and the kept scores are the classifier's best among them
    boxes = [p.proposal_boxes for p in proposals]
    regions = heads.region_features(features, boxes, images.image_sizes)[: len(boxes[0])]
    cca = heads.shortlist(regions, vocab)[0]
    assert torch.equal(index.sort(1).values, cca.topk(3, dim=1).indices.sort(1).values)
    logits = heads.classifier(regions, vocab)[0].gather(1, index)
    torch.testing.assert_close(scores, logits.topk(2, dim=1).values.sigmoid())


def test_cascade_needs_a_shortlist_capable_classifier():
    class NoEncode(torch.nn.Module):
        def forward(self, r, p, targets=None):
            return p @ r.t(), {}

    cfg = _cfg()
    heads = _heads(cfg)
    with pytest.raises(ValueError, match="CASCADE_TOPK 5"):
        PhraseROIHeads(region_features=heads.region_features, classifier=NoEncode(), box_regressor=heads.box_regressor,
                       box2box_transform=heads.box2box_transform, rois_per_phrase=4, positive_fraction=0.25, fg_threshold=0.5,
                       shortlist=None, cascade_topk=5)


def _phrase_iou_loop(proposal_boxes, gt_boxes, gt_phrase_ids, num_phrases):
    """The obvious computation phrase_iou replaces: phrase by phrase, the max over its instances."""
    iou_all = pairwise_iou(gt_boxes, proposal_boxes)
    iou = iou_all.new_zeros((num_phrases, len(proposal_boxes)))
    matched = torch.zeros((num_phrases, len(proposal_boxes)), dtype=torch.long)
    for p in range(num_phrases):
        (rows,) = torch.nonzero(gt_phrase_ids == p, as_tuple=True)
        if len(rows):
            best, arg = iou_all[rows].max(dim=0)
            iou[p], matched[p] = best, rows[arg]
    return iou, matched


@pytest.mark.usefixtures("builtin_root")
def test_phrase_iou_equals_the_phrase_by_phrase_max_on_the_builtin_training_images():
    # every training image's phrase instances (one phrase in five not asked about, -1), against proposals that are
    # those boxes (ties of 1.0 where phrases share a box), jittered copies and random boxes
    gen = torch.Generator().manual_seed(0)
    records = DatasetCatalog.get("builtin_flickr30k_entities_train")
    ties = 0
    for record in records[:200]:
        phrases = sorted({a["phrase"] for a in record["annotations"]})
        boxes = [(b, phrases.index(a["phrase"])) for a in record["annotations"] for b in a["boxes"]]
        gt = torch.tensor([b for b, _ in boxes], dtype=torch.float32)
        ids = torch.tensor([p if p % 5 != 4 else -1 for _, p in boxes])
        corners = torch.rand(40, 2, generator=gen) * 100
        random_boxes = torch.cat([corners, corners + 5 + torch.rand(40, 2, generator=gen) * 60], dim=1)
        props = torch.cat([gt, gt + torch.randn(gt.shape, generator=gen) * 4, random_boxes])
        args = (Boxes(props), Boxes(gt), ids, len(phrases) + 1)  # one phrase without an instance
        iou, matched = phrase_iou(*args)
        ref_iou, ref_matched = _phrase_iou_loop(*args)
        assert torch.equal(iou, ref_iou) and torch.equal(matched, ref_matched), record["image_id"]
        ties += int((pairwise_iou(Boxes(gt), Boxes(props)) == 1).sum(0).gt(1).sum())
    assert ties > 0  # instances sharing a box were among them: the first best instance is taken, as in the loop
