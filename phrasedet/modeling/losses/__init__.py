"""Losses shared by the task families: bidirectional ranking (hinge) losses with in-batch
negatives (VSE0, VSE++, paper 000's embedding network, paper 003's Embedding Network), the
balanced logistic pair loss (paper 000's similarity network), CLIP's symmetric InfoNCE (a
reference), and gathering a batch from every
process with gradients kept for the local part; paper 001's instance loss (a classifier shared by
both modalities, one class per training image)."""
from .gather import all_gather_with_grad, gather_batch
from .infonce import InfoNCELoss
from .instance import InstanceLoss
from .logistic import LogisticPairLoss
from .ranking import (NEGATIVE_MODES, RankingLoss, embedding_scores, mean_topk, neighbourhood_hinges, ranking_hinges,
                      reduce_hinges)

__all__ = [
    "NEGATIVE_MODES", "InfoNCELoss", "InstanceLoss", "RankingLoss", "LogisticPairLoss", "all_gather_with_grad", "embedding_scores", "gather_batch",
    "mean_topk", "neighbourhood_hinges", "ranking_hinges", "reduce_hinges",
]
