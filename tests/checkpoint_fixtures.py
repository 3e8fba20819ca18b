"""Fake weights files with the real key names of every documented ``MODEL.WEIGHTS`` source, for
tests of the real-data configs: random values, built on the CPU from Detectron2's own model-zoo
configs and torchvision's ResNets (no download).

- :func:`write_model_zoo_checkpoint`: a Detectron2 model-zoo ``.pkl`` (``{"model": {name:
  ndarray}, "__author__": ...}``) of a model-zoo config, e.g. COCO Faster R-CNN R101-C4;
- :func:`write_imagenet_pkl`: an ImageNet ResNet as Detectron2's ``convert-torchvision-to-d2.py``
  writes it (Detectron2 ResNet names without prefix, ``"matching_heuristics": True``);
- :func:`write_torchvision_resnet`: a raw torchvision ResNet ``.pth`` (``layer1.0.conv1.weight``);
- :func:`phrasedet_config`: a config of ``configs/`` set up to build on the CPU without data.

Each writer returns the ``{name: Tensor}`` it wrote. Every tensor is random (running variances
positive), so a tensor left at its initialization never equals the file's.
"""
import os
import pickle

import torch

__all__ = ["CONFIG_DIR", "phrasedet_config", "random_state", "give_trained_statistics", "write_imagenet_pkl", "write_model_zoo_checkpoint",
           "write_torchvision_resnet"]

CONFIG_DIR = os.path.join(os.path.dirname(__file__), "..", "configs")
R101_C4 = "COCO-Detection/faster_rcnn_R_101_C4_3x.yaml"


def random_state(state: dict, seed: int = 0) -> dict:
    """``state`` with every floating tensor replaced by random values (variances in [0.5, 1.5))."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for k, v in state.items():
        if not v.is_floating_point():
            out[k] = v.clone()
        elif k.endswith("running_var"):
            out[k] = torch.rand(v.shape, generator=g) + 0.5
        else:
            out[k] = torch.randn(v.shape, generator=g) * 0.1
    return out


def give_trained_statistics(module: torch.nn.Module) -> None:
    """Set every BatchNorm running statistic of ``module`` in place to values a trained CNN has, far
    from mean 0 and variance 1, so that a load that reset them (as Detectron2's FrozenBatchNorm2d
    does to absent ones) would show."""
    for name, buf in module.named_buffers():
        if name.endswith("running_mean"):
            buf.uniform_(-2, 2)
        elif name.endswith("running_var"):
            buf.uniform_(50, 500)


def _write_pkl(path, state: dict, **extra) -> None:
    with open(path, "wb") as f:
        pickle.dump({"model": {k: v.numpy() for k, v in state.items()}, **extra}, f)


def write_model_zoo_checkpoint(path, zoo_config: str = R101_C4, seed: int = 0) -> dict:
    """A model-zoo ``.pkl`` with the names and shapes of Detectron2's model of ``zoo_config``."""
    from detectron2 import model_zoo
    from detectron2.modeling import build_model

    cfg = model_zoo.get_config(zoo_config)
    cfg.MODEL.DEVICE = "cpu"
    state = random_state(build_model(cfg).state_dict(), seed)
    _write_pkl(path, state, __author__="Detectron2 Model Zoo")
    return state


def _detectron2_resnet_state(depth: int) -> dict:
    from detectron2.config import get_cfg
    from detectron2.layers import ShapeSpec
    from detectron2.modeling.backbone.resnet import build_resnet_backbone

    cfg = get_cfg()
    cfg.MODEL.RESNETS.DEPTH = depth
    cfg.MODEL.RESNETS.NORM = "BN"  # a converted torchvision file keeps BatchNorm's num_batches_tracked
    cfg.MODEL.RESNETS.STRIDE_IN_1X1 = False
    cfg.MODEL.RESNETS.OUT_FEATURES = ["res5"]
    return build_resnet_backbone(cfg, ShapeSpec(channels=3)).state_dict()


def write_imagenet_pkl(path, depth: int, seed: int = 0) -> dict:
    """An ImageNet ResNet-``depth`` ``.pkl`` as Detectron2's torchvision conversion writes it
    (``stem.conv1.weight``, ``res2.0.conv1.norm.running_mean``, ..., the classifier as ``stem.fc``)."""
    state = _detectron2_resnet_state(depth)
    width = 2048 if depth >= 50 else 512
    state.update({"stem.fc.weight": torch.zeros(1000, width), "stem.fc.bias": torch.zeros(1000)})
    state = random_state(state, seed)
    _write_pkl(path, state, __author__="torchvision", matching_heuristics=True)
    return state


def torchvision_resnet(depth: int, seed: int = 0):
    """torchvision's ResNet-``depth`` (no weights downloaded) with random values, in eval mode."""
    import torchvision

    model = getattr(torchvision.models, f"resnet{depth}")(weights=None)
    model.load_state_dict(random_state(model.state_dict(), seed))
    return model.eval()


def write_torchvision_resnet(path, depth: int, seed: int = 0) -> dict:
    """A raw torchvision ResNet-``depth`` state dict saved with ``torch.save`` (as downloaded)."""
    state = torchvision_resnet(depth, seed).state_dict()
    torch.save(state, path)
    return state


def phrasedet_config(name: str, tmp_dir, opts=()):
    """The config ``configs/<name>`` on the CPU with a tiny word-vector file (the phrase and
    sentence encoders need words, not data), then ``opts``."""
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    vectors = os.path.join(str(tmp_dir), "word_vectors.txt")
    with open(vectors, "w") as f:
        f.write("3 4\nred 1 0 0 0\ncircle 0 1 0 0\na 0 0 1 0\n")
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(CONFIG_DIR, name))
    cfg.merge_from_list(["MODEL.DEVICE", "cpu", "PHRASEDET.TEXT.WORD_VECTORS", "file", "PHRASEDET.TEXT.WORD_VECTORS_PATH",
                         vectors, "PHRASEDET.TEXT.WORD_VECTORS_FORMAT", "word2vec_text", *opts])
    return cfg


def _caffe2_name(name: str) -> str:
    """Detectron2's ResNet name -> the MSRA Caffe2 blob name Detectron2's c2 renaming reads back
    (``res2.0.conv1.norm.weight`` -> ``res2_0_branch2a_bn_s``, ``stem.conv1.weight`` -> ``conv1_w``)."""
    name = name.replace("stem.conv1.norm.", "res_conv1_bn.").replace("stem.conv1.", "conv1.").replace("stem.fc.", "pred.")
    parts = name.split(".")
    out = []
    for p in parts:
        if p.startswith("conv") and p[4:].isdigit() and len(out) >= 2:
            p = "branch2" + "abc"[int(p[4:]) - 1]
        elif p == "shortcut":
            p = "branch1"
        elif p == "norm":
            p = "bn"
        out.append(p)
    stem, leaf = "_".join(out[:-1]), out[-1]
    return f"{stem}_{ {'weight': 'w', 'bias': 'b'}[leaf] if not stem.endswith('bn') else {'weight': 's', 'bias': 'b'}[leaf]}"


def write_caffe2_pkl(path, depth: int, seed: int = 0) -> dict:
    """An MSRA ImageNet ResNet-``depth`` ``.pkl`` as Caffe2 / Detectron1 wrote them: ``{"blobs":
    {caffe2 name: ndarray}}`` with every weight's ``_momentum`` beside it and affine BatchNorm (scale
    and bias, no running statistics). Returns the ``{Detectron2 name: Tensor}`` it holds."""
    state = {k: v for k, v in _detectron2_resnet_state(depth).items() if not k.endswith(("running_mean", "running_var",
                                                                                          "num_batches_tracked"))}
    state = random_state(state, seed)
    blobs = {}
    for k, v in state.items():
        blobs[_caffe2_name(k)] = v.numpy()
        blobs[_caffe2_name(k) + "_momentum"] = torch.full_like(v, 123.0).numpy()  # a reader must not take these
    with open(path, "wb") as f:
        pickle.dump({"blobs": blobs}, f)
    return state
