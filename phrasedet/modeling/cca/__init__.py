"""Canonical correlation analysis between region and phrase features (paper 003 Sec. 3.3.2-3.3.3,
4.1): the projections behind the CCA and Deep CCA region classifiers and the CCA initialization of
the Embedding Network and CITE. The classifiers themselves are in ``modeling/classifiers/``
(``cca.py``, ``deep_cca.py``); stage 2 of the recipe (``engine/staged/recipe.py``) fits and saves what
they load.

- ``linear.py``: closed-form linear CCA (:func:`fit_cca` from phrase-grouped streaming moments,
  :func:`fit_cca_paired` from paired rows) and the fitted :class:`CCAProjection`.
- ``fitting.py``: positive (region, phrase) pairs collected with a trained detector, stacked CCA
  fitted on them (layer 2 on the ReLU of layer 1), and the saved CCA-layer ``.npz`` file.
- ``layers.py``: :class:`CCAInitLinear`, the fully connected layer initialized from a CCA
  projection, with the regularizer that keeps it near its initialization.
- ``deep.py``: Deep CCA: the correlation loss, the per-view FC layer trained with it, and
  :class:`DeepCCAProjector` (the layers followed by linear CCA on their outputs).
- ``deep_fitting.py``: Deep CCA fitted on stage 2's pairs, and its ``.npz`` file.

``linear.py`` needs only numpy and scipy (``tools/benchmarks/benchmark_cca.py`` loads it by its path).
"""
from .deep import DeepCCAProjector, cca_correlation_loss, deep_cca_layer, paired_correlations, train_deep_cca
from .deep_fitting import fit_deep_cca_from_pairs, load_deep_cca, save_deep_cca
from .fitting import (cca_layer_dims, collect_positive_pairs, fit_cca_from_detector, fit_stacked_cca, load_cca_layers,
                      replayable, save_cca_layers, save_npz, training_pairs)
from .layers import CCAInitLinear
from .linear import CCAProjection, PhraseGroupedMoments, fit_cca, fit_cca_paired
