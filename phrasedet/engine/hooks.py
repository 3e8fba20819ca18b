"""Training hooks."""
import logging

from detectron2.engine import HookBase

__all__ = ["BackboneUnfreezeHook", "NegativesWarmupHook"]

logger = logging.getLogger("phrasedet.engine")


class BackboneUnfreezeHook(HookBase):
    """Fine-tune the image backbone from iteration ``iteration`` on (VSE++ fine-tunes late): before
    every step, ``model.image_encoder.backbone_trainable = trainer.iter >= iteration``, so a
    resumed run is in the right phase."""

    def __init__(self, iteration: int):
        self.iteration = int(iteration)

    def before_step(self):
        encoder = getattr(self.trainer.model, "module", self.trainer.model).image_encoder
        trainable = self.trainer.iter >= self.iteration
        if encoder.backbone_trainable != trainable:
            encoder.backbone_trainable = trainable
            logger.info("Iteration %d: image backbone %s", self.trainer.iter, "fine-tuned from now on" if trainable else "frozen")


class NegativesWarmupHook(HookBase):
    """Sum the hinges of all in-batch negatives before iteration ``iteration``, then use the
    configured negatives (``model.loss.negatives``): the warm-up that keeps the max of hinges from
    collapsing at a cold start (paper 002 calls it a curriculum; VSE-infinity's code warms up so)."""

    def __init__(self, iteration: int, negatives: str):
        self.iteration, self.negatives = int(iteration), negatives

    def before_step(self):
        loss = getattr(self.trainer.model, "module", self.trainer.model).loss
        mode = "all" if self.trainer.iter < self.iteration else self.negatives
        if loss.negatives != mode:
            loss.negatives = mode
            logger.info("Iteration %d: the ranking loss uses negatives %r", self.trainer.iter, mode)
