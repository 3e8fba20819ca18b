"""A registered toy retrieval split and a deterministic stand-in for the model's outputs."""
import importlib.util
import os

import numpy as np
import torch
from detectron2.data import DatasetCatalog, MetadataCatalog
from ..tool_runs import tool_path

RETRIEVAL_TOY = "evaltest_retrieval_toy"
CAPTION_COUNTS = [2, 1, 0, 3, 2, 2, 1, 1, 2, 0, 3, 1]  # 12 images (folds 1, 2, 3, 4, 6), 18 captions
DIM = 6
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def retrieval_toy_dicts():
    return [{"image_id": f"img{n:02d}", "file_name": f"img{n:02d}.jpg", "height": 8, "width": 8,
             "captions": [f"caption {k} of image {n}" for k in range(c)]} for n, c in enumerate(CAPTION_COUNTS)]


def register_retrieval_toy():
    if RETRIEVAL_TOY in DatasetCatalog.list():
        return
    DatasetCatalog.register(RETRIEVAL_TOY, retrieval_toy_dicts)
    MetadataCatalog.get(RETRIEVAL_TOY).set(evaluator_type="retrieval")


def toy_outputs(record):
    """The output for one image (a function of its image_id). Multiples of 1/4 in a small range: every
    score is exact in float32, so the numbers do not depend on how they are summed."""
    n = int(record["image_id"][3:])
    rng = np.random.default_rng(n)
    image = rng.integers(-4, 5, DIM) / 4.0
    captions = image + rng.integers(-4, 5, (len(record["captions"]), DIM)) / 4.0
    return {"image_embedding": torch.tensor(image, dtype=torch.float32),
            "caption_embeddings": torch.tensor(captions, dtype=torch.float32).reshape(-1, DIM)}


def toy_arrays():
    """``(images [N, D], captions [M, D], caption_to_image [M])`` in dataset order."""
    outs = [toy_outputs(d) for d in retrieval_toy_dicts()]
    images = torch.stack([o["image_embedding"] for o in outs]).numpy()
    captions = torch.cat([o["caption_embeddings"] for o in outs]).numpy()
    return images, captions, np.repeat(np.arange(len(CAPTION_COUNTS)), CAPTION_COUNTS)


class NegativeSquaredDistance:
    """A scorer that is not a dot product: -|a - b|^2 (picklable, for spawned processes)."""

    def pairwise(self, images, captions):
        return -((images[:, None, :] - captions[None, :, :]) ** 2).sum(-1)

    def paired(self, images, captions):
        return -((images - captions) ** 2).sum(-1)


def load_tool(name):
    """``tools/<name>.py`` as a module."""
    spec = importlib.util.spec_from_file_location(f"_tool_{name}", tool_path(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
