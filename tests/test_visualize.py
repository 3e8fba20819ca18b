"""Drawing phrase detections, test-set pictures from an untrained model, and the CLI's errors."""
import importlib.util
import os

import numpy as np
import pytest
import torch
from PIL import Image

from phrasedet.utils import draw_phrase_detections, predict_phrases, save_test_visualizations, upscale_factor
from .tool_runs import tool_path

ROOT = os.path.join(os.path.dirname(__file__), "..")
QA_RCNN = os.path.join(ROOT, "configs", "qa_rcnn.yaml")


def _load_tool(name):
    spec = importlib.util.spec_from_file_location(f"_tool_{name}", tool_path(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tool_main(argv):
    return _load_tool("visualize_phrases").main(argv)


def test_upscale_factor():
    assert upscale_factor(128, 128, 512) == 4
    assert upscale_factor(96, 128, 512) == 6  # ceil(512 / 96)
    assert upscale_factor(600, 800, 512) == 1


def test_draw_upscales_and_marks_the_box():
    image = np.full((96, 128, 3), 128, np.uint8)
    box = np.array([[20.0, 30.0, 60.0, 70.0]])
    out = draw_phrase_detections(image, ["red circle"], box, np.array([0.87]), gt_boxes=[np.array([[18.0, 28.0, 62.0, 72.0]])])
    assert out.dtype == np.uint8 and out.shape == (96 * 6, 128 * 6, 3)
    changed = np.any(out != 128, axis=2)
    x0, y0, x1, y1 = (box[0] * 6).astype(int)
    # the outline: every side of the box has drawn pixels, and the label sits inside the box
    assert changed[y0 - 3:y0 + 4, x0 + 5:x1 - 5].any(axis=0).mean() > 0.9
    assert changed[y1 - 3:y1 + 4, x0 + 5:x1 - 5].any(axis=0).mean() > 0.9
    assert changed[y0 + 5:y1 - 5, x0 - 3:x0 + 4].any(axis=1).mean() > 0.9
    assert changed[y0 + 5:y1 - 5, x1 - 3:x1 + 4].any(axis=1).mean() > 0.9
    assert changed[y0 + 6:y0 + 40, x0 + 6:x1 - 6].any()
    # far from the boxes nothing is drawn
    assert not changed[80 * 6:, 90 * 6:].any()
    # without the ground truth, its dashed outline (outside the detection) is gone
    plain = draw_phrase_detections(image, ["red circle"], box, np.array([0.87]))
    assert not np.any(plain != 128, axis=2)[int(18 * 6) - 2:int(18 * 6) + 3, x0 + 20:x1 - 20].any()


def test_draw_skips_missing_detections_and_keeps_large_images():
    image = np.zeros((600, 700, 3), np.uint8)
    out = draw_phrase_detections(image, ["a", "b"], np.full((2, 4), np.nan), np.array([np.nan, np.nan]))
    assert out.shape == image.shape and not out.any()


@pytest.fixture(scope="module")
def untrained_qa_rcnn(builtin_root):
    from detectron2.config import get_cfg
    from detectron2.modeling import build_model

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(QA_RCNN)
    cfg.merge_from_list(["MODEL.RPN.PRE_NMS_TOPK_TEST", 100, "MODEL.RPN.POST_NMS_TOPK_TEST", 50])
    torch.manual_seed(0)
    model = build_model(cfg)
    model.eval()
    return cfg, model


def test_save_test_visualizations_writes_pngs(untrained_qa_rcnn, tmp_path):
    from detectron2.data import DatasetCatalog

    cfg, model = untrained_qa_rcnn
    name = cfg.DATASETS.TEST[0]
    paths = save_test_visualizations(cfg, model, name, str(tmp_path / "vis"), num_images=2)
    dicts = DatasetCatalog.get(name)[:2]
    assert paths == [str(tmp_path / "vis" / f"{d['image_id']}.png") for d in dicts]
    for path, d in zip(paths, dicts):
        with Image.open(path) as im:
            im.load()
            s = upscale_factor(d["height"], d["width"], 512)
            assert im.size == (d["width"] * s, d["height"] * s) and min(im.size) >= 512


def test_predict_phrases_normalizes_and_returns_boxes_in_the_image(untrained_qa_rcnn):
    cfg, model = untrained_qa_rcnn
    image = np.random.RandomState(0).randint(0, 255, (100, 200, 3), dtype=np.uint8)
    phrases, boxes, scores = predict_phrases(model, image, ["A red Circle", "the blue square"], cfg.INPUT.FORMAT, cfg)
    assert phrases == ["red circle", "blue square"]
    assert boxes.shape == (2, 4) and scores.shape == (2,)
    assert np.all((scores >= 0) & (scores <= 1))
    assert np.all(boxes[:, [0, 2]] <= 200 + 1e-3) and np.all(boxes[:, [1, 3]] <= 100 + 1e-3) and np.all(boxes >= 0)
    assert not model.training
    with pytest.raises(ValueError, match="no phrases"):
        predict_phrases(model, image, [], cfg.INPUT.FORMAT, cfg)


def test_cli_names_the_missing_image(tmp_path, capsys):
    tool = _load_tool("visualize_phrases")
    missing = tmp_path / "no_such_picture.jpg"
    with pytest.raises(SystemExit) as exit_info:
        tool.main(["--config-file", QA_RCNN, "--image", str(missing), "--phrases", "a red circle",
                   "--output", str(tmp_path / "out.png")])
    assert exit_info.value.code != 0
    assert "no_such_picture.jpg" in capsys.readouterr().err


def test_cli_needs_phrases(tmp_path, capsys):
    tool = _load_tool("visualize_phrases")
    image = tmp_path / "img.png"
    Image.new("RGB", (32, 32)).save(image)
    with pytest.raises(SystemExit) as exit_info:
        tool.main(["--config-file", QA_RCNN, "--image", str(image), "--output", str(tmp_path / "out.png")])
    assert exit_info.value.code != 0
    assert "no phrases given" in capsys.readouterr().err
    assert not (tmp_path / "out.png").exists()


def test_cli_overrides_after_phrases_are_not_phrases():
    tool = _load_tool("visualize_phrases")
    args = tool.build_parser().parse_args(["--config-file", "c.yaml", "--image", "i.png", "--phrases", "a red circle",
                                           "MODEL.DEVICE", "cpu"])
    tool._split_overrides(args)
    assert args.phrases == ["a red circle"] and args.opts == ["MODEL.DEVICE", "cpu"]


def test_cli_loads_weights_draws_and_prints(untrained_qa_rcnn, tmp_path, capsys):
    from detectron2.checkpoint import DetectionCheckpointer
    from detectron2.data import DatasetCatalog

    cfg, model = untrained_qa_rcnn
    DetectionCheckpointer(model, save_dir=str(tmp_path)).save("weights")
    d = DatasetCatalog.get(cfg.DATASETS.TEST[0])[0]
    out = tmp_path / "out" / "drawn.png"
    assert tool_main(["--config-file", QA_RCNN, "--weights", str(tmp_path / "weights.pth"), "--image", d["file_name"],
                      "--phrases", "A red circle", "the blue square", "--output", str(out),
                      "MODEL.RPN.PRE_NMS_TOPK_TEST", "100", "MODEL.RPN.POST_NMS_TOPK_TEST", "50"]) == 0
    printed = capsys.readouterr().out
    assert "red circle" in printed and "blue square" in printed and str(out) in printed
    with Image.open(out) as im:
        assert min(im.size) >= 512
