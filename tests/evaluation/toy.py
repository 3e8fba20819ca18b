"""Hand-built ground truth and detections for the evaluation tests."""
import numpy as np
from detectron2.data import DatasetCatalog, MetadataCatalog

from phrasedet.evaluation import PhraseDetections, PhraseGroundTruth

# Boxes (continuous xyxy). IoU(A, A_HALF) = 50 / 100 = 0.5 exactly: a true positive at >= 0.5.
A = [0.0, 0.0, 10.0, 10.0]
A_HALF = [0.0, 0.0, 10.0, 5.0]
A_LOW = [0.0, 0.0, 10.0, 4.9]  # IoU(A, A_LOW) = 0.49
B = [20.0, 20.0, 30.0, 30.0]
FAR = [100.0, 100.0, 110.0, 110.0]


def build(images, gts, dets, k=1, phrases=None):
    """Ground truth and detections from plain Python.

    images: image ids in dataset order; gts: list of (image_id, phrase, box) in annotation order;
    dets: {(image_id, phrase): [(score, box), ...]} (detection k = list position; pairs not listed
    have no detection); phrases: vocabulary (default: sorted GT phrases).
    """
    if phrases is None:
        phrases = sorted({p for _, p, _ in gts})
    index = {i: n for n, i in enumerate(images)}
    pidx = {p: n for n, p in enumerate(phrases)}
    gt = PhraseGroundTruth(images, phrases, [index[i] for i, _, _ in gts], [pidx[p] for _, p, _ in gts],
                           np.array([b for _, _, b in gts], dtype=float).reshape(-1, 4))
    store = PhraseDetections(gt, k)
    for n, image_id in enumerate(images):
        scores = np.full((len(phrases), k), np.nan, np.float32)
        boxes = np.full((len(phrases), k, 4), np.nan, np.float32)
        for (i, p), lst in dets.items():
            if i == image_id:
                for kk, (s, b) in enumerate(lst):
                    scores[pidx[p], kk] = s
                    boxes[pidx[p], kk] = b
        store.add_image(n, scores, boxes)
    return gt, store


def ap_of(result, phrase):
    return float(result.ap[result.phrases.index(phrase)])


# ----------------------------------------------------------------------------- a registered toy split
TOY_TRAIN, TOY_TEST = "evaltest_toy_train", "evaltest_toy_test"
TOY_PHRASES = ["man", "woman", "dog", "red car", "blue sky", "tree", "unseen thing"]


def _toy_box(rng):
    x, y = rng.integers(0, 60, 2) * 1.0
    return [x, y, x + rng.integers(10, 40), y + rng.integers(10, 40)]


def toy_train_dicts():
    # training counts: man 150 (common), woman 101 (common), dog 100 (few), red car 1 (few),
    # blue sky 3 (few), tree 0 and unseen thing 0 (zero-shot)
    counts = {"man": 150, "woman": 101, "dog": 100, "red car": 1, "blue sky": 3}
    anns = [{"phrase": p, "bbox": [0.0, 0.0, 1.0, 1.0]} for p, c in counts.items() for _ in range(c)]
    return [{"image_id": "t0", "height": 100, "width": 100, "annotations": anns}]


def toy_test_dicts(num_images=13, seed=3):
    rng = np.random.default_rng(seed)
    dicts = []
    for n in range(num_images):
        phrases = rng.choice(TOY_PHRASES, size=rng.integers(0, 5))  # repeats: several instances
        anns = [{"phrase": str(p), "bbox": _toy_box(rng)} for p in phrases]
        dicts.append({"image_id": str(1000 + n), "height": 100, "width": 100, "annotations": anns})
    return dicts


def register_toy():
    if TOY_TEST in DatasetCatalog.list():
        return
    DatasetCatalog.register(TOY_TRAIN, toy_train_dicts)
    DatasetCatalog.register(TOY_TEST, toy_test_dicts)
    MetadataCatalog.get(TOY_TRAIN).set(evaluator_type="phrase_detection", train_dataset=TOY_TRAIN)
    MetadataCatalog.get(TOY_TEST).set(evaluator_type="phrase_detection", train_dataset=TOY_TRAIN)


def noisy_outputs(record, phrases, k=2, ties=True):
    """Deterministic detections of one image (a function of its image_id): scores on a coarse grid
    (many exact ties across images), boxes near the GT box for annotated phrases, else random."""
    import torch

    image_id = record["image_id"]
    rng = np.random.default_rng(int(image_id) if image_id.isdigit() else sum(map(ord, image_id)))
    V = len(phrases)
    scores = rng.integers(0, 8, (V, k)) / 8.0 if ties else rng.random((V, k))
    scores = -np.sort(-scores, axis=1)
    xy = rng.uniform(0, 80, (V, k, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(5, 40, (V, k, 2))], axis=-1)
    pos = {p: j for j, p in enumerate(phrases)}
    for ann in record["annotations"]:
        j = pos.get(ann["phrase"])
        if j is not None:
            noisy = np.asarray(ann["bbox"]) + rng.normal(0, 3, (k, 4))
            boxes[j] = np.concatenate([np.minimum(noisy[:, :2], noisy[:, 2:]), np.maximum(noisy[:, :2], noisy[:, 2:])], axis=1)
    return {"phrases": phrases, "scores": torch.as_tensor(scores, dtype=torch.float32),
            "boxes": torch.as_tensor(boxes, dtype=torch.float32)}
