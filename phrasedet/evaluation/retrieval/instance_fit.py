"""How paper 001's instance loss fits a representation: the diagnosis behind its stage-I verdict.

Two measurements (``tools/evaluation/probe_instance_loss.py`` runs them; docs/RETRIEVAL.md, issue 43):

* :func:`feature_profile`: the scale and sparsity of an image representation's pooled features
  (a ``[N, F]`` array, one row per image, as ``tools/data/extract_image_features.py`` and the oracle
  write them): how many columns are nonzero in few training images (*rare*), so that a linear
  classifier can name an image from one of them, and how much of a validation image's mass lies
  in columns that no training image uses.
* :func:`instance_fit`: how well the shared instance classifier (one class per training image)
  names the training images and their captions, with top-1 accuracy and cross-entropy per side,
  and the mean norm of the unnormalized features it scores.
"""
from typing import Dict, Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from phrasedet.modeling.meta_arch.image_text_embedding import image_key

__all__ = ["RARE_SUPPORT", "dimension_support", "common_columns", "feature_profile", "instance_fit", "format_profiles",
           "format_fits"]

#: A column is *rare* when 1 to RARE_SUPPORT training images have it nonzero.
RARE_SUPPORT = 5


def dimension_support(features: np.ndarray) -> np.ndarray:
    """[F] int: in how many rows of ``features [N, F]`` each column is nonzero."""
    return (np.asarray(features) != 0).sum(0)


def common_columns(train: np.ndarray, rare: int = RARE_SUPPORT) -> np.ndarray:
    """[F] bool: the columns of ``train [N, F]`` nonzero in more than ``rare`` rows (neither unused
    nor rare): what is left of a representation once no column can name a few training images."""
    return dimension_support(train) > rare


def _mass_share(features: np.ndarray, columns: np.ndarray) -> float:
    """Mean over rows of the share (%) of a row's absolute mass in ``columns`` (rows of zeros count 0)."""
    mass = np.abs(features)
    total = mass.sum(1)
    share = mass[:, columns].sum(1) / np.where(total > 0, total, 1.0)  # a row of zeros: 0 / 1
    return float(100 * share.mean())


def feature_profile(train: np.ndarray, val: np.ndarray, rare: int = RARE_SUPPORT) -> Dict[str, float]:
    """Scale and sparsity of pooled features, ``train [N, F]`` and ``val [M, F]``.

    Returns:
        dims (F), nonzero (% of the training entries), mean_norm (mean L2 norm of a training row),
        unused_dims (columns zero in every training row), rare_dims (columns nonzero in 1 to
        ``rare`` training rows), images_with_rare (% of training rows nonzero in a rare column),
        rare_mass (mean % of a training row's absolute mass in rare columns), val_unused_mass (mean %
        of a validation row's absolute mass in unused columns).
    """
    train, val = np.asarray(train, dtype=np.float64), np.asarray(val, dtype=np.float64)
    if train.ndim != 2 or val.ndim != 2 or train.shape[1] != val.shape[1]:
        raise ValueError(f"features must be [N, F] and [M, F] with one F, got {train.shape} and {val.shape}")
    support = dimension_support(train)
    rare_columns, unused = (support >= 1) & (support <= rare), support == 0
    return {"dims": int(train.shape[1]), "nonzero": float(100 * (train != 0).mean()),
            "mean_norm": float(np.linalg.norm(train, axis=1).mean()), "unused_dims": int(unused.sum()),
            "rare_dims": int(rare_columns.sum()), "images_with_rare": float(100 * (train[:, rare_columns] != 0).any(1).mean()),
            "rare_mass": _mass_share(train, rare_columns), "val_unused_mass": _mass_share(val, unused)}


@torch.no_grad()
def instance_fit(model, batches: Iterable[list]) -> Dict[str, float]:
    """The instance classifier of ``model`` (an ``ImageTextEmbedding`` with an instance loss, in
    eval mode) on the training images of ``batches`` (lists of dataset dicts, each with its
    ``captions``).

    Returns:
        image_accuracy, text_accuracy (% of images / captions whose top class is their image's),
        image_loss, text_loss (mean cross-entropy), image_norm, text_norm (mean L2 norm of the
        unnormalized features), images, captions (counts).
    """
    classifier = model.instance_loss.classifier
    sums = {k: 0.0 for k in ("image_accuracy", "text_accuracy", "image_loss", "text_loss", "image_norm", "text_norm")}
    counts = {"image": 0, "text": 0}
    for batch in batches:
        classes = model.instance_classes(batch, [image_key(x.get("dataset", ""), x["image_id"]) for x in batch])
        captions = [c for x in batch for c in x["captions"]]
        owner = torch.tensor([i for i, x in enumerate(batch) for _ in x["captions"]], dtype=torch.long, device=classes.device)
        for side, features, target in (("image", model.image_features(batch), classes),
                                       ("text", model.sentence_encoder(captions), classes[owner])):
            logits = classifier(features)
            sums[f"{side}_accuracy"] += float((logits.argmax(1) == target).sum())
            sums[f"{side}_loss"] += float(F.cross_entropy(logits, target, reduction="sum"))
            sums[f"{side}_norm"] += float(features.norm(dim=1).sum())
            counts[side] += int(target.numel())
    if not counts["image"]:
        raise ValueError("instance_fit: no images in the batches")
    out = {k: v / counts[k.split("_")[0]] for k, v in sums.items()}
    out["image_accuracy"] *= 100
    out["text_accuracy"] *= 100
    return {**out, "images": counts["image"], "captions": counts["text"]}


def format_profiles(profiles: Dict[str, Dict[str, float]], rare: int = RARE_SUPPORT) -> str:
    """A table of :func:`feature_profile` results, one row per representation."""
    head = (f"| representation | dims | nonzero (%) | mean norm | unused dims | rare dims (1-{rare} images) | "
            "training images with a rare dim (%) | mass in rare dims (%) | val. mass in unused dims (%) |")
    lines = [head, "|" + "---|" * 9]
    for name, p in profiles.items():
        lines.append(f"| {name} | {p['dims']} | {p['nonzero']:.1f} | {p['mean_norm']:.2f} | {p['unused_dims']} | "
                     f"{p['rare_dims']} | {p['images_with_rare']:.1f} | {p['rare_mass']:.1f} | {p['val_unused_mass']:.1f} |")
    return "\n".join(lines)


def format_fits(rows: Dict[str, Dict[str, float]], columns: Sequence[str] = ()) -> str:
    """A table of :func:`instance_fit` results (plus any ``columns`` of the rows, e.g. rsums), one
    row per run; a missing value is '-'."""
    fit = ["image_accuracy", "text_accuracy", "image_loss", "text_loss", "image_norm", "text_norm"]
    keys = fit + list(columns)
    lines = ["| run | " + " | ".join(keys) + " |", "|" + "---|" * (len(keys) + 1)]
    for name, row in rows.items():
        cells = [f"{row[k]:.2f}" if row.get(k) is not None else "-" for k in keys]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
