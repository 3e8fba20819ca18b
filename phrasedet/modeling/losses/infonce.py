"""CLIP's symmetric InfoNCE loss with a learnable temperature (Radford et al. 2021), the loss a user
today would train a joint embedding with: a reference beside the papers' hinge losses.

With L2-normalized embeddings and the learned scale s = exp(t) (t initialized to log(1 / 0.07) and
clamped to [0, log 100], as CLIP does after every step), the logits are s * cosine. Each positive
pair (image owner[c], caption c) of the batch gives two cross-entropy rows:

* image-anchored: the image's logits over the batch's captions, target c;
* caption-anchored: the caption's logits over the batch's images, target owner[c];

and the loss is the mean of the two rows' means over the C pairs, ``(CE_image + CE_caption) / 2``.
With one caption per image this is CLIP's loss exactly. With several captions per image (or the
same dataset image twice in a gathered batch), a row's other positives are left out of its
softmax: they are neither its target nor its negatives. With several processes the loss is
computed on the gathered global batch (:func:`.gather.gather_batch`), as the hinge losses are.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from .gather import gather_batch

__all__ = ["InfoNCELoss"]


class InfoNCELoss(nn.Module):
    """The symmetric InfoNCE loss of the module docstring.

    Args:
        temperature: initial temperature (CLIP: 0.07): the scale starts at 1 / temperature.
        learn_temperature: the log-scale is a trained parameter (CLIP); False keeps it fixed.
        max_scale: the largest scale (CLIP: 100).
        gather: with several processes, the loss over the whole global batch.
    """

    def __init__(self, temperature: float = 0.07, learn_temperature: bool = True, max_scale: float = 100.0,
                 gather: bool = True):
        super().__init__()
        if not (0 < temperature and 1 / temperature <= max_scale):
            raise ValueError(f"need 0 < temperature and 1 / temperature <= max_scale, got temperature {temperature} "
                             f"and max_scale {max_scale}")
        self.log_scale = nn.Parameter(torch.tensor(math.log(1 / temperature)), requires_grad=learn_temperature)
        self.max_log_scale, self.gather = math.log(max_scale), gather

    @property
    def scale(self) -> torch.Tensor:
        """The current scale exp(t), t clamped to [0, log max_scale]."""
        return self.log_scale.clamp(0.0, self.max_log_scale).exp()

    def forward(self, images: torch.Tensor, captions: torch.Tensor, owner: torch.Tensor, image_keys: torch.Tensor) -> dict:
        """
        Args:
            images: [I, D] L2-normalized image embeddings.
            captions: [C, D] L2-normalized caption embeddings.
            owner: [C] long, the row in ``images`` of each caption's image.
            image_keys: [I] long, a dataset-wide identifier of each image.

        Returns:
            ``{"loss_infonce_image": CE_image / 2, "loss_infonce_caption": CE_caption / 2}``.
        """
        if self.gather:
            images, captions, owner, image_keys = gather_batch(images, captions, owner, image_keys)
        logits = self.scale * images @ captions.t()  # [I, C]
        pairs = torch.arange(len(owner), device=owner.device)
        same = image_keys[:, None] == image_keys[owner][None, :]  # [I, C]: image i and caption c show one image
        others = same[owner] & (pairs[:, None] != pairs[None, :])  # [C, C]: the image's other captions
        image_rows = logits[owner].masked_fill(others, float("-inf"))  # row c: owner[c]'s image over the captions
        own = torch.arange(len(images), device=owner.device)[None, :] == owner[:, None]  # [C, I]
        caption_rows = logits.t().masked_fill(same.t() & ~own, float("-inf"))  # row c: caption c over the images
        return {"loss_infonce_image": F.cross_entropy(image_rows, pairs) / 2,
                "loss_infonce_caption": F.cross_entropy(caption_rows, owner) / 2}
