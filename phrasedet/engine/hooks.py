"""Training hooks."""
import logging

from detectron2.engine import HookBase

from phrasedet.modeling.roi_heads.region_cache import RegionCache

__all__ = ["BackboneUnfreezeHook", "NegativesWarmupHook", "RegionCacheHook"]

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


class RegionCacheHook(HookBase):
    """Train (and validate) a stage of a ``PhraseRCNN`` with a frozen detector on its region cache
    (:class:`~phrasedet.modeling.roi_heads.region_cache.RegionCache`): made for the first stage
    that uses it and kept in ``shared`` for the next ones (the second stage-3 phase, the
    random-initialization baseline: the same frozen detector), handed to the model before
    training and taken back after it (the test that follows runs the detector).

    Args:
        shared: a dict the stages of one recipe share (the cache under ``"cache"``).
    """

    def __init__(self, shared: dict):
        self.shared = shared

    def _model(self):
        return getattr(self.trainer.model, "module", self.trainer.model)

    def before_train(self):
        model = self._model()
        if "cache" in self.shared:
            model.region_cache = self.shared["cache"].bind(model)
        else:
            model.region_cache = self.shared["cache"] = RegionCache(model)

    def after_train(self):
        model = self._model()
        if model.region_cache is not None:
            logger.info("Region cache: %d images computed in this stage, %d cached in all", model.region_cache.computed,
                        len(model.region_cache))
        model.region_cache = None
