"""Deep CCA region classifier (paper 003 Sec. 3.3.3): regions and phrases go through Deep CCA's
frozen FC layers (:func:`phrasedet.modeling.cca.deep.deep_cca_layer`), then through the linear CCA
fitted on their outputs, scored by the cosine of the projected (scaled) features as
:class:`CCAClassifier` (which this one holds for that part). No trained parameters, no loss: the
layers are trained in stage 2 of the recipe (``phrasedet.modeling.cca.deep.train_deep_cca``)."""
import torch
from torch import nn

from ..cca import DeepCCAProjector, deep_cca_layer
from .build import REGION_CLASSIFIER_REGISTRY
from .cca import CCAClassifier

__all__ = ["DeepCCAClassifier"]

_SIDES = ("region", "phrase")


def deep_cca_out_dim(cfg, region_dim: int, phrase_dim: int) -> int:
    """``PHRASEDET.DEEP_CCA.OUT_DIM`` resolved: 0 means min(D_r, D_t)."""
    return cfg.PHRASEDET.DEEP_CCA.OUT_DIM or min(region_dim, phrase_dim)


@REGION_CLASSIFIER_REGISTRY.register()
class DeepCCAClassifier(nn.Module):
    """logit(p, r) = cos(CCA_phrase(f_t(t_p)), CCA_region(f_r(r))), f = sigmoid(W standardize(.) + b).

    :meth:`load_deep_cca` takes a :class:`DeepCCAProjector`. Its layers are buffers (saved and
    loaded with the model, sized from the checkpoint); forward raises until one is loaded.
    ``losses`` is always {}.
    """

    trainable = False  # trained in stage 2: the staged recipe neither trains nor selects it in stage 3

    def __init__(self, cfg, region_dim: int, phrase_dim: int):
        super().__init__()
        self.region_dim, self.phrase_dim = region_dim, phrase_dim
        self.out_dim = deep_cca_out_dim(cfg, region_dim, phrase_dim)
        self.cca = CCAClassifier(cfg, self.out_dim, self.out_dim)
        for side, d in zip(_SIDES, (region_dim, phrase_dim)):
            for name, shape in zip(DeepCCAProjector.LAYER_FIELDS, ((d,), (d,), (self.out_dim, d), (self.out_dim,))):
                self.register_buffer(f"{side}_{name}", torch.zeros(shape))

    def load_deep_cca(self, projector: DeepCCAProjector) -> None:
        """Use ``projector``'s layers and linear CCA."""
        for side, d in zip(_SIDES, (self.region_dim, self.phrase_dim)):
            values = [torch.as_tensor(v, dtype=torch.float32) for v in projector.layer(side)]
            mean, std, weight, bias = values
            if mean.shape != (d,) or std.shape != (d,) or weight.ndim != 2 or weight.shape[1] != d or bias.shape != weight.shape[:1]:
                raise ValueError(f"Deep CCA {side} layer: mean {tuple(mean.shape)}, std {tuple(std.shape)}, weight "
                                 f"{tuple(weight.shape)}, bias {tuple(bias.shape)} do not fit inputs of size {d}")
            for name, value in zip(DeepCCAProjector.LAYER_FIELDS, values):
                self.register_buffer(f"{side}_{name}", value.to(getattr(self, f"{side}_{name}").device))
        self.out_dim = self.region_weight.shape[0]
        self.cca.region_dim = self.cca.phrase_dim = self.out_dim
        self.cca.load_projection(projector.cca)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # size the layers from the checkpoint (the CCA part sizes itself), so a fitted classifier loads into a fresh one
        for side in _SIDES:
            for name in DeepCCAProjector.LAYER_FIELDS:
                key = f"{prefix}{side}_{name}"
                if key in state_dict and getattr(self, f"{side}_{name}").shape != state_dict[key].shape:
                    self.register_buffer(f"{side}_{name}", torch.empty_like(state_dict[key]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _features(self, feats, side: str):
        if self.cca.num_layers == 0:
            raise RuntimeError("Deep CCA not fitted: call DeepCCAClassifier.load_deep_cca(train_deep_cca(...)) (or load a "
                               "checkpoint holding one) before forward")
        return deep_cca_layer(feats, *(getattr(self, f"{side}_{name}") for name in DeepCCAProjector.LAYER_FIELDS))

    def encode_phrases(self, phrase_feats):
        """[P, D_t] -> L2-normalized projected phrases [P, k]."""
        return self.cca.encode_phrases(self._features(phrase_feats, "phrase"))

    def score_encoded(self, region_feats, codes, region_index=None):
        """[R, D_r], codes [P, k] -> cosines [P, R] ([P, k'] for ``region_index`` [P, k'])."""
        return self.cca.score_encoded(self._features(region_feats, "region"), codes, region_index)

    def forward(self, region_feats, phrase_feats, targets=None):
        """[R, D_r], [P, D_t] -> cosine logits [P, R] and {} (no gradient loss here)."""
        return self.score_encoded(region_feats, self.encode_phrases(phrase_feats)), {}
