"""Image-sentence retrieval: Recall@K, median and mean rank in both directions (papers 000-002).

See docs/EVALUATION.md ("Image-sentence retrieval") for the rank definitions, the tie rule, the
protocols (whole split, F folds) and the saved embeddings / scores files.
"""
from .dataset import caption_to_image_of, load_retrieval_split
from .evaluator import RetrievalEvaluator
from .files import EMBEDDINGS_FILE, SCORES_FILE, ScoresWriter, load_embeddings, load_scores, save_embeddings
from .metrics import METRIC_KEYS, average_metrics, recall_metrics
from .protocols import evaluate_blocks, evaluate_retrieval, evaluate_similarity, result_key
from .ranks import RankCounter, check_caption_to_image, ranks_from_similarity, retrieval_ranks
from .report import format_retrieval_table
from .scorers import DotProductScorer, paired_scores, score_blocks

__all__ = [
    "DotProductScorer", "EMBEDDINGS_FILE", "METRIC_KEYS", "RankCounter", "RetrievalEvaluator", "SCORES_FILE",
    "ScoresWriter", "average_metrics", "caption_to_image_of", "check_caption_to_image", "evaluate_blocks",
    "evaluate_retrieval", "evaluate_similarity", "format_retrieval_table", "load_embeddings", "load_retrieval_split",
    "load_scores", "paired_scores", "ranks_from_similarity", "recall_metrics", "result_key", "retrieval_ranks",
    "save_embeddings", "score_blocks",
]
