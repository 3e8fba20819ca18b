"""``phrasedet://`` addresses: the files of the built-in pretrained models, wherever they are kept.

``phrasedet://<model>/<file>``, e.g. ``phrasedet://builtin_detector/model_final.pth`` or
``phrasedet://builtin_cnn/backbone.pth``, names a file of a built-in pretrained model
(:data:`phrasedet.engine.pretrained_models.BUILTIN_MODELS`), found in this order:

1. ``results/<model>/<file>`` of this repository: the copy kept beside the records, the same on
   every machine;
2. ``<file>`` of the model trained once into ``$PHRASEDET_CACHE``
   (:func:`~phrasedet.engine.pretrained_models.ensure_builtin_model`): when ``<file>`` is
   ``model_final.pth``, the model is trained there on first use (minutes to half an hour on 2
   cores, logged);
3. else an error naming both places.

:class:`BuiltinWeightsHandler` is registered with Detectron2's ``PathManager`` when ``phrasedet``
is imported, so any config's ``MODEL.WEIGHTS`` (and ``MODEL.RETRIEVAL.BACKBONE_WEIGHTS``) may give
such an address, as it gives a ``detectron2://`` model-zoo one.
"""
import logging
import os

from detectron2.utils.file_io import PathHandler, PathManager

__all__ = ["PREFIX", "RESULTS_DIR", "BuiltinWeightsHandler", "builtin_weights"]

logger = logging.getLogger(__name__)

PREFIX = "phrasedet://"
#: Where the repository keeps the built-in models' files (``results/<model>/``).
RESULTS_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "results"))
TRAINED_FILE = "model_final.pth"  # what training a built-in model writes, and the file trained for on demand


def builtin_weights(model: str, file: str = TRAINED_FILE) -> str:
    """The local path of ``file`` of built-in model ``model`` (see the module docstring).

    Raises:
        FileNotFoundError: ``model`` is not a built-in model, or ``file`` is neither kept nor in
            the cached model's folder (and is not the file training makes).
    """
    from phrasedet.engine.pretrained_models import BUILTIN_MODELS, builtin_model_dir, ensure_builtin_model

    address = f"{PREFIX}{model}/{file}"
    if model not in BUILTIN_MODELS:
        raise FileNotFoundError(f"{address}: no built-in pretrained model {model!r} (there are {', '.join(BUILTIN_MODELS)})")
    kept = os.path.join(RESULTS_DIR, model, file)
    if os.path.isfile(kept):
        return kept
    cached = os.path.join(builtin_model_dir(model), file)
    if file == TRAINED_FILE and not os.path.isfile(cached):
        logger.warning("%s: not kept at %s; training it once into %s", address, kept, os.path.dirname(cached))
        cached = ensure_builtin_model(model)
    if not os.path.isfile(cached):
        raise FileNotFoundError(f"{address}: not kept at {kept} and not in the cached model's folder {os.path.dirname(cached)} "
                                f"(only {TRAINED_FILE} is trained on demand: name {PREFIX}{model}/{TRAINED_FILE}, or put the "
                                "file where the first path says)")
    return cached


class BuiltinWeightsHandler(PathHandler):
    """Detectron2's (iopath's) handler of ``phrasedet://`` addresses: :func:`builtin_weights`."""

    PREFIX = PREFIX

    def _get_supported_prefixes(self):
        return [self.PREFIX]

    def _local(self, path: str) -> str:
        model, _, file = path[len(self.PREFIX):].partition("/")
        if not model or not file:
            raise ValueError(f"{path!r}: a built-in weights address is {self.PREFIX}<model>/<file>, "
                             f"e.g. {self.PREFIX}builtin_detector/{TRAINED_FILE}")
        return builtin_weights(model, file)

    def _get_local_path(self, path: str, force: bool = False, **kwargs) -> str:
        self._check_kwargs(kwargs)
        return self._local(path)

    def _open(self, path: str, mode: str = "r", buffering: int = -1, **kwargs):
        self._check_kwargs(kwargs)
        return open(self._local(path), mode, buffering=buffering)


PathManager.register_handler(BuiltinWeightsHandler())  # on import (import phrasedet), as Detectron2 registers detectron2://
