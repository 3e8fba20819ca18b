"""The phrase-presence oracle: a diagnostic that splits a phrase detector's mAP into its two jobs.

Open-ended phrase detection (paper 003, Sec. 5) asks a model about every test phrase in every test
image. Its mAP therefore mixes two abilities:

* **localization ranking**: among the images that contain a phrase, scoring the right box above
  the wrong ones and above the other images' boxes of that phrase;
* **presence**: scoring a phrase low in the images that do not contain it. Every detection there
  is a false positive, whatever its box.

The oracle removes the second job: it keeps a model's detections only in the (image, phrase)
pairs that have ground truth, as if a perfect phrase filter (paper 003 Sec. 6.2, with the true
phrases of each image) had run first. The mAP it gives is the model's localization ranking alone;
the gap between it and the plain mAP is what the model loses on absent phrases. Localization
accuracy does not change (it reads only pairs with ground truth).

Not a model and not a method of the paper: an upper bound used to say *why* one model's mAP is
below another's (docs/PHRASE_DETECTION.md).
"""
import numpy as np

from .detections import PhraseDetections

__all__ = ["presence_oracle_detections"]


def presence_oracle_detections(dets: PhraseDetections) -> PhraseDetections:
    """A copy of ``dets`` whose detections of phrases absent from their image are removed.

    Args:
        dets: detections over a test split; ``dets.scores`` [N, V, K], ``dets.pair_boxes`` [M, K, 4].

    Returns:
        new :class:`PhraseDetections` on the same ground truth: ``scores[n, v, :]`` is NaN ("no
        detection") unless image n has an instance of phrase v; the boxes are shared, unchanged.
    """
    gt = dets.gt
    out = PhraseDetections(gt, dets.k)
    out.scores.fill(np.nan)
    out.scores[gt.pair_image, gt.pair_phrase] = dets.scores[gt.pair_image, gt.pair_phrase]
    out.pair_boxes = dets.pair_boxes
    out.filled[:] = dets.filled
    return out
