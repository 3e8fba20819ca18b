"""Ground truth of a test split as flat arrays, and the test vocabulary.

Images are indexed by their position in the dataset (``DatasetCatalog`` order) and phrases by
their position in the vocabulary. Every ground-truth instance (one annotation: a (caption,
phrase) occurrence with its union box) is one row of the ``gt_*`` arrays. Instances of the same
phrase in the same image form a *pair* ``(image, phrase)``; inside a pair, instances keep the
annotation order and get a ``copy`` index ``0..m-1`` (the reference mode appends one copy of the
image's detections per instance, see :mod:`.phrase_detection_ap`).
"""
from typing import Iterable, List, Optional, Sequence

import numpy as np

__all__ = ["test_vocabulary", "PhraseGroundTruth"]


def test_vocabulary(dataset_dicts: Iterable[dict]) -> List[str]:
    """Sorted distinct ``phrase`` of all annotations of ``dataset_dicts``.

    The open-vocabulary model scores exactly these phrases in every test image; every one of them
    has at least one test instance.
    """
    return sorted({ann["phrase"] for d in dataset_dicts for ann in d.get("annotations", ())})


test_vocabulary.__test__ = False  # not a test, although pytest would collect the name where imported


def _check_unique(items: list, index: dict, what: str, where: str) -> None:
    """``index`` maps each of ``items`` to its position: fewer keys than items means a duplicate,
    a ValueError naming the first one."""
    if len(index) != len(items):
        seen = set()
        for x in items:
            if x in seen:
                raise ValueError(f"{what} {x!r} occurs more than once in {where}")
            seen.add(x)


def _check_range(index: np.ndarray, size: int, what: str) -> None:
    """Every ground-truth ``what`` index lies in ``[0, size)``: ValueError naming the first instance otherwise."""
    bad = np.flatnonzero((index < 0) | (index >= size))
    if len(bad):
        g = int(bad[0])
        raise ValueError(f"ground-truth instance {g}: {what} index {int(index[g])} is out of range for {size} {what}s")


class PhraseGroundTruth:
    """Ground-truth instances of a test split, grouped into (image, phrase) pairs.

    Parameters
    ----------
    image_ids : sequence of str, length N
        Image ids in dataset order (distinct). The position is the image index used everywhere,
        including the tie-breaking rule of the ranking.
    phrases : sequence of str, length V
        The phrase vocabulary (distinct).
    gt_image, gt_phrase : int arrays [G]
        Image and phrase index of each instance (one instance may be given as two ints).
    gt_box : float array [G, 4]
        Instance box, continuous ``[x1, y1, x2, y2]`` (one instance: a box [4]).

    Attributes
    ----------
    gt_image, gt_phrase, gt_copy, gt_pair : int64 arrays [G]; gt_box : float64 array [G, 4]
        Instances sorted by (image, phrase), stable (annotation order inside a pair); ``gt_copy``
        is the index of the instance inside its pair, ``gt_pair`` the pair's index.
    pair_image, pair_phrase, pair_num_gt, pair_first_gt : int64 arrays [M]
        Pairs sorted by (image, phrase); ``pair_first_gt`` is the first row of the pair's
        instances (they are contiguous).
    num_gt : int64 array [V]
        Number of test instances of each phrase (0: the phrase is skipped by the mAP).
    """

    def __init__(self, image_ids: Sequence[str], phrases: Sequence[str], gt_image, gt_phrase, gt_box):
        self.image_ids = [str(i) for i in image_ids]
        self.phrases = list(phrases)
        self.image_index = {image_id: i for i, image_id in enumerate(self.image_ids)}
        self.phrase_index = {p: j for j, p in enumerate(self.phrases)}
        _check_unique(self.image_ids, self.image_index, "image_id", "the dataset")
        _check_unique(self.phrases, self.phrase_index, "phrase", "the phrase vocabulary")
        N, V = len(self.image_ids), len(self.phrases)
        # a single instance may be given as two indices and one box
        gt_image = np.asarray(gt_image, dtype=np.int64).reshape(-1)
        gt_phrase = np.asarray(gt_phrase, dtype=np.int64).reshape(-1)
        gt_box = np.asarray(gt_box, dtype=np.float64).reshape(-1, 4)
        if not (len(gt_image) == len(gt_phrase) == len(gt_box)):
            raise ValueError(f"gt_image, gt_phrase and gt_box must have the same length, got {len(gt_image)}, "
                             f"{len(gt_phrase)} and {len(gt_box)}")
        _check_range(gt_image, N, "image")
        _check_range(gt_phrase, V, "phrase")

        order = np.lexsort((gt_phrase, gt_image))  # stable: annotation order inside a pair
        self.gt_image, self.gt_phrase, self.gt_box = gt_image[order], gt_phrase[order], gt_box[order]
        key = self.gt_image * V + self.gt_phrase
        new_pair = np.ones(len(key), dtype=bool)
        new_pair[1:] = key[1:] != key[:-1]
        self.pair_first_gt = np.flatnonzero(new_pair).astype(np.int64)
        self.pair_key = key[self.pair_first_gt]
        self.pair_image = self.gt_image[self.pair_first_gt]
        self.pair_phrase = self.gt_phrase[self.pair_first_gt]
        self.pair_num_gt = np.diff(np.append(self.pair_first_gt, len(key))).astype(np.int64)
        self.gt_pair = np.cumsum(new_pair) - 1
        self.gt_copy = np.arange(len(key)) - self.pair_first_gt[self.gt_pair]  # int64 (numpy 2 ints)
        self.num_gt = np.bincount(self.gt_phrase, minlength=V)  # int64
        # pairs of image i are pair_start[i]:pair_start[i + 1]
        self.image_pair_start = np.searchsorted(self.pair_image, np.arange(N + 1))

    @classmethod
    def from_dataset_dicts(cls, dataset_dicts: Sequence[dict], phrases: Optional[Sequence[str]] = None):
        """Instances of ``d["annotations"]`` (``phrase`` and ``bbox``) of every record.

        ``phrases`` defaults to :func:`test_vocabulary`; when given it must contain every
        annotated phrase.
        """
        dataset_dicts = list(dataset_dicts)
        if phrases is None:
            phrases = test_vocabulary(dataset_dicts)
        index = {p: j for j, p in enumerate(phrases)}
        gt_image, gt_phrase, gt_box = [], [], []
        for i, d in enumerate(dataset_dicts):
            for ann in d.get("annotations", ()):
                j = index.get(ann["phrase"])
                if j is None:
                    raise ValueError(f"image {d['image_id']!r}: annotated phrase {ann['phrase']!r} "
                                     f"is not in the vocabulary")
                gt_image.append(i)
                gt_phrase.append(j)
                gt_box.append(ann["bbox"])
        return cls([d["image_id"] for d in dataset_dicts], phrases, gt_image, gt_phrase, gt_box)  # it casts

    @property
    def num_images(self) -> int:
        return len(self.image_ids)

    @property
    def num_phrases(self) -> int:
        return len(self.phrases)

    @property
    def num_instances(self) -> int:
        return len(self.gt_image)

    @property
    def num_pairs(self) -> int:
        return len(self.pair_image)

    def pairs_of_image(self, image_index: int) -> slice:
        """Slice of the pair arrays holding the pairs of one image (sorted by phrase index)."""
        return slice(int(self.image_pair_start[image_index]), int(self.image_pair_start[image_index + 1]))

    def find_pairs(self, image_index, phrase_index) -> np.ndarray:
        """Pair index of each ``(image_index, phrase_index)``, -1 where the image has no instance of the phrase."""
        # int64 before multiplying: int32 indices would overflow at N * V > 2**31
        key = np.asarray(image_index, dtype=np.int64) * self.num_phrases + np.asarray(phrase_index)
        pos = np.searchsorted(self.pair_key, key)
        if self.num_pairs == 0:
            return np.full(key.shape, -1)
        # pos == num_pairs: key is above every pair key, so it differs from the last one too
        found = self.pair_key[np.minimum(pos, self.num_pairs - 1)] == key
        return np.where(found, pos, -1)
