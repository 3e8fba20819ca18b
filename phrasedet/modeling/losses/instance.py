"""Paper 001's instance loss: every training image with its captions is a class of its own.

One linear classifier without bias, ``W_share`` [N_classes, E], scores the **unnormalized**
features of both modalities (paper 001, Eqs. 5-8; its code has no bias), and each modality gets a
softmax cross-entropy against the class of its image group::

    L_visual  = -log softmax(W_share f_img)[c]       (mean over the batch's images)
    L_textual = -log softmax(W_share f_text)[c]      (mean over the batch's captions)

Sharing ``W_share`` is what puts both modalities in one space: the gradient of each loss reaches
the classifier, so the class vectors are pulled towards images and captions alike.
"""
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["InstanceLoss"]


class InstanceLoss(nn.Module):
    """Cross-entropy of both modalities through one shared classifier.

    Args:
        embed_dim: E, the feature size.
        num_classes: N, one class per training image (Flickr30K: 29,783; COCO: 113,287).
        image_weight: weight of ``L_visual`` (paper 001's lambda_2: 1); 0 leaves it out.
        text_weight: weight of ``L_textual`` (lambda_3: 1; released COCO code: 0.1); 0 leaves it out.
    """

    def __init__(self, embed_dim: int, num_classes: int, image_weight: float = 1.0, text_weight: float = 1.0):
        super().__init__()
        if num_classes < 1:
            raise ValueError(f"the instance loss needs at least one class (training image), got {num_classes}")
        self.classifier = nn.Linear(embed_dim, num_classes, bias=False)
        nn.init.normal_(self.classifier.weight, std=0.001)
        self.image_weight, self.text_weight = float(image_weight), float(text_weight)

    @property
    def num_classes(self) -> int:
        return self.classifier.out_features

    def forward(self, image_features: torch.Tensor, caption_features: torch.Tensor, image_classes: torch.Tensor,
                caption_classes: torch.Tensor) -> dict:
        """
        Args:
            image_features: [B, E] unnormalized image features.
            caption_features: [C, E] unnormalized caption features.
            image_classes: [B] long, the class (training-image index) of each image.
            caption_classes: [C] long, the class of each caption (its image's).

        Returns:
            ``{"loss_instance_image": scalar, "loss_instance_text": scalar}``, weighted; a term of
            weight 0 is left out.
        """
        out = {}
        if self.image_weight:
            out["loss_instance_image"] = self.image_weight * F.cross_entropy(self.classifier(image_features), image_classes)
        if self.text_weight:
            out["loss_instance_text"] = self.text_weight * F.cross_entropy(self.classifier(caption_features), caption_classes)
        return out
