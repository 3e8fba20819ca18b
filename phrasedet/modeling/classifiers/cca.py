"""CCA region classifier (paper 003 Sec. 3.3.2): frozen normalized-CCA projections of regions and
phrases, scored by the cosine similarity of the projected (scaled) features. No trained parameters,
no loss: the projections are fitted in closed form (``phrasedet.modeling.cca.linear.fit_cca``)."""
import torch
import torch.nn.functional as F
from torch import nn

from .build import REGION_CLASSIFIER_REGISTRY, dot_scores

__all__ = ["CCAClassifier"]

_FIELDS = ("region_mean", "region_proj", "phrase_mean", "phrase_proj", "scale")


@REGION_CLASSIFIER_REGISTRY.register()
class CCAClassifier(nn.Module):
    """logit(p, r) = cos(((t_p - mean_y) B) * s, ((r - mean_x) A) * s).

    :meth:`load_projection` takes one ``CCAProjection`` (the paper's single linear CCA), or a list
    of them for the stacked CCA the released test script scores (``TEST_CCA``: CCA-initialized,
    not fine-tuned layers with a ReLU between consecutive layers). The projections are buffers,
    saved and loaded with the model; forward raises until one is loaded. ``losses`` is always {}.
    """

    trainable = False  # nothing to learn by gradient: the staged recipe neither trains nor selects it

    def __init__(self, cfg, region_dim: int, phrase_dim: int):
        super().__init__()
        self.region_dim, self.phrase_dim = region_dim, phrase_dim
        self.num_layers = 0

    def load_projection(self, projection) -> None:
        """Use ``projection`` (a ``CCAProjection`` or a list of them, lowest layer first)."""
        layers = list(projection) if isinstance(projection, (list, tuple)) else [projection]
        if not layers:
            raise ValueError("no CCA projection given")
        tensors = []
        d_r, d_t = self.region_dim, self.phrase_dim
        for i, proj in enumerate(layers):
            t = [torch.as_tensor(getattr(proj, n), dtype=torch.float32) for n in ("mean_x", "A", "mean_y", "B", "scale")]
            mx, A, my, B, s = t
            if A.shape[0] != d_r or B.shape[0] != d_t or mx.numel() != d_r or my.numel() != d_t or A.shape[1] != B.shape[1] or s.numel() != A.shape[1]:
                raise ValueError(
                    f"CCA layer {i + 1}: A {tuple(A.shape)}, B {tuple(B.shape)}, scale {tuple(s.shape)} do not fit inputs of size ({d_r}, {d_t})"
                )
            tensors.append((mx.reshape(-1), A, my.reshape(-1), B, s.reshape(-1)))
            d_r = d_t = A.shape[1]
        self._set_layers(tensors)

    def _set_layers(self, tensors) -> None:
        for i in range(self.num_layers):
            for name in _FIELDS:
                delattr(self, f"{name}_{i}")
        device = next(self.buffers(), torch.empty(0)).device
        for i, values in enumerate(tensors):
            for name, value in zip(_FIELDS, values):
                self.register_buffer(f"{name}_{i}", value.to(device))
        self.num_layers = len(tensors)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # size the buffers from the checkpoint, so a fitted classifier loads into a fresh one; a
        # checkpoint without this module (e.g. trained without the cascade) keeps the loaded projection
        n = 0
        while f"{prefix}scale_{n}" in state_dict:
            n += 1
        if n and n != self.num_layers:
            self._set_layers([tuple(torch.empty_like(state_dict[f"{prefix}{name}_{i}"]) for name in _FIELDS) for i in range(n)])
        elif n:
            for i in range(n):
                for name in _FIELDS:
                    if getattr(self, f"{name}_{i}").shape != state_dict[f"{prefix}{name}_{i}"].shape:
                        self.register_buffer(f"{name}_{i}", torch.empty_like(state_dict[f"{prefix}{name}_{i}"]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _project(self, feats, side: str):
        """[N, D] -> [N, k], through every layer (ReLU between); side "region" or "phrase"."""
        if self.num_layers == 0:
            raise RuntimeError("CCA not fitted: call CCAClassifier.load_projection(fit_cca(...)) (or load a checkpoint holding one) before forward")
        x = feats
        for i in range(self.num_layers):
            if i:
                x = F.relu(x)
            x = ((x - getattr(self, f"{side}_mean_{i}")) @ getattr(self, f"{side}_proj_{i}")) * getattr(self, f"scale_{i}")
        return x

    def project(self, region_feats, phrase_feats):
        """Projected, scaled features: regions [R, k], phrases [P, k] (ReLU between stacked layers)."""
        return self._project(region_feats, "region"), self._project(phrase_feats, "phrase")

    def encode_phrases(self, phrase_feats):
        """[P, D_t] -> L2-normalized projected phrases [P, k]."""
        return F.normalize(self._project(phrase_feats, "phrase"), dim=-1)

    def score_encoded(self, region_feats, codes, region_index=None):
        """[R, D_r], codes [P, k] -> cosines [P, R] ([P, k'] for ``region_index`` [P, k'])."""
        return dot_scores(codes, F.normalize(self._project(region_feats, "region"), dim=-1), region_index)

    def forward(self, region_feats, phrase_feats, targets=None):
        """[R, D_r], [P, D_t] -> cosine logits [P, R] and {} (CCA has no gradient loss)."""
        return self.score_encoded(region_feats, self.encode_phrases(phrase_feats)), {}
