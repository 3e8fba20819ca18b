"""The mapper's output feeds Detectron2's own data loader and a Faster R-CNN training step."""
import os

import torch
from detectron2.config import get_cfg
from detectron2.data import build_detection_train_loader
from detectron2.modeling import build_model
from detectron2.utils.events import EventStorage

from phrasedet.config import add_phrasedet_config
from phrasedet.data import PhraseDatasetMapper

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs")


def test_train_loader_and_one_faster_rcnn_step(builtin_root):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(CONFIGS, "Base-Builtin.yaml"))
    # Detectron2's own Faster R-CNN on the same backbone: the records and the mapper are plain Detectron2 data
    cfg.merge_from_list(["DATALOADER.NUM_WORKERS", 0, "SOLVER.IMS_PER_BATCH", 2, "MODEL.META_ARCHITECTURE", "GeneralizedRCNN",
                         "MODEL.ROI_HEADS.NAME", "StandardROIHeads", "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE", 32])
    loader = build_detection_train_loader(cfg, mapper=PhraseDatasetMapper(cfg, is_train=True))
    batch = next(iter(loader))
    assert len(batch) == 2
    for d in batch:
        assert d["image"].shape[0] == 3 and 1 <= len(d["phrases"]) <= 5
        ids = d["instances"].gt_phrase_ids
        assert set(ids[ids >= 0].tolist()) == set(range(len(d["phrases"])))
    torch.manual_seed(0)
    model = build_model(cfg)
    model.train()
    with EventStorage():
        losses = model(batch)
    assert set(losses) == {"loss_rpn_cls", "loss_rpn_loc", "loss_cls", "loss_box_reg"}
    total = sum(losses.values())
    assert torch.isfinite(total)
    total.backward()
