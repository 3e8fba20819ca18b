"""``add_retrieval_config``: global image-sentence retrieval (papers 000, 001 and 002):
``MODEL.RETRIEVAL``, ``INPUT.RETRIEVAL``, ``TEST.RETRIEVAL``, ``PHRASEDET.RETRIEVAL_STAGES``."""
from detectron2.config import CfgNode as CN

__all__ = ["add_retrieval_config"]


def add_retrieval_config(cfg):
    """Keys of ``ImageTextEmbedding``, its caption mapper and the retrieval evaluator."""
    _C = cfg
    _C.MODEL.RETRIEVAL = CN()
    # Image input: "pixels" (a Detectron2 backbone on the image), "features" (precomputed pooled rows, IMAGE_FEATURES_DIR) or "maps" (precomputed pre-pooling maps [C, h, w] per image, IMAGE_FEATURES_DIR, in place of the backbone's: the built-in oracle's spatial form).
    _C.MODEL.RETRIEVAL.IMAGE_INPUT = "pixels"
    # Precomputed image features for IMAGE_INPUT "features" or "maps": <dir>/<dataset name>.npy, one row per image in the split's order (tools/data/extract_image_features.py writes features; tools/data/make_oracle_features.py both).
    _C.MODEL.RETRIEVAL.IMAGE_FEATURES_DIR = ""
    # A checkpoint whose backbone tensors ("backbone.*", e.g. a Detectron2 detector such as the phrase-detection recipe's stage1_detector, or "image_encoder.backbone.*") initialize the image backbone; "" = none (MODEL.WEIGHTS still loads whole models).
    _C.MODEL.RETRIEVAL.BACKBONE_WEIGHTS = ""
    # Backbone output pooled into the image vector (e.g. "res5").
    _C.MODEL.RETRIEVAL.BACKBONE_FEATURE = "res5"
    # Global pooling of that map: "avg" (VSE++'s ResNet), "max" or "weldon" (paper 004).
    _C.MODEL.RETRIEVAL.POOLING = "avg"
    # WELDON pooling: mean of the K_MAX largest plus mean of the K_MIN smallest activations of each map (paper 004: 1 and 1; its code: 15 and 15).
    _C.MODEL.RETRIEVAL.WELDON_K_MAX = 1
    # See WELDON_K_MAX; 0 leaves out the minimum term.
    _C.MODEL.RETRIEVAL.WELDON_K_MIN = 1
    # Paper 004's "adaptation": a 1x1 convolution of the backbone map to this many maps before pooling (DSVE-loc: 2400); 0 = none (the pooled backbone map, VSE++).
    _C.MODEL.RETRIEVAL.ADAPTATION_DIM = 0
    # Bias of the adaptation convolution (paper 004's text: none; its code: a bias).
    _C.MODEL.RETRIEVAL.ADAPTATION_BIAS = True
    # The adaptation convolution is frozen with the backbone until FREEZE_BACKBONE_ITERS (paper 004: it belongs to the pre-trained trunk); False: trained from the start (there is no pre-trained one on the built-in data).
    _C.MODEL.RETRIEVAL.ADAPTATION_FROZEN_WITH_BACKBONE = False
    # Dropout on the pooled feature before the image projection (paper 004: 0.5).
    _C.MODEL.RETRIEVAL.POOLED_DROPOUT = 0.0
    # L2-normalize the pooled CNN feature before the projection (VSE++ code with the full CNN).
    _C.MODEL.RETRIEVAL.NORMALIZE_POOLED = True
    # The backbone is frozen (no gradient, BatchNorm in inference mode) before this iteration and fine-tuned from it; -1: frozen throughout (VSE++ without FT).
    _C.MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS = -1
    # Size of the joint embedding space (VSE++: 1024; paper 000: 512).
    _C.MODEL.RETRIEVAL.EMBED_DIM = 1024
    # Image projection: "linear" (VSE++) or "two_layer" (paper 000's branch, BRANCH.*).
    _C.MODEL.RETRIEVAL.IMAGE_PROJECTION = "linear"
    # L2-normalize the image embedding (VSE++; VSE0 was trained without: --no_imgnorm).
    _C.MODEL.RETRIEVAL.NORMALIZE_IMAGE = True
    # Sentence encoder from SENTENCE_ENCODER_REGISTRY: "GRUSentenceEncoder" (VSE++) or "FixedVectorSentenceEncoder" (paper 000) or "WordVectorRNNSentenceEncoder" (paper 004, RNN.*) or "TextCNNSentenceEncoder" (paper 001, TEXT_CNN.*).
    _C.MODEL.RETRIEVAL.SENTENCE_ENCODER = "GRUSentenceEncoder"
    # Image-sentence score: "cosine" (embedding networks) or "similarity_network" (paper 000's similarity network).
    _C.MODEL.RETRIEVAL.SCORE = "cosine"

    _C.MODEL.RETRIEVAL.BRANCH = CN()
    # Paper 000's two-layer branch FC -> BN -> ReLU -> Dropout -> FC: hidden size (paper, retrieval: 2048).
    _C.MODEL.RETRIEVAL.BRANCH.HIDDEN_DIM = 2048
    # Dropout after the ReLU (paper 000, retrieval: 0.5).
    _C.MODEL.RETRIEVAL.BRANCH.DROPOUT = 0.5
    # BatchNorm after the first FC (paper 000's code; its text puts BN after the last FC).
    _C.MODEL.RETRIEVAL.BRANCH.BATCH_NORM = True

    _C.MODEL.RETRIEVAL.GRU = CN()
    # Word embedding size (VSE++: 300).
    _C.MODEL.RETRIEVAL.GRU.WORD_DIM = 300
    # GRU hidden size; 0: EMBED_DIM with no projection after the GRU (VSE++ code), else a linear projection to EMBED_DIM (VSE++ Eq. 2).
    _C.MODEL.RETRIEVAL.GRU.HIDDEN_DIM = 0
    # GRU layers (VSE++: 1).
    _C.MODEL.RETRIEVAL.GRU.NUM_LAYERS = 1
    # Training-caption words seen fewer times map to <unk> (VSE++: 4).
    _C.MODEL.RETRIEVAL.GRU.MIN_WORD_COUNT = 4
    # Initialize word embeddings from PHRASEDET.TEXT's word vectors (their size must be WORD_DIM); False: U(-0.1, 0.1) as VSE++.
    _C.MODEL.RETRIEVAL.GRU.INIT_WORD_VECTORS = False

    _C.MODEL.RETRIEVAL.RNN = CN()
    # WordVectorRNNSentenceEncoder (paper 004): fixed PHRASEDET.TEXT word vectors -> a recurrent net of hidden size EMBED_DIM, its output at the last word; "sru" (the PyPI package sru) or "gru".
    _C.MODEL.RETRIEVAL.RNN.TYPE = "sru"
    # Stacked layers (paper 004: 4).
    _C.MODEL.RETRIEVAL.RNN.NUM_LAYERS = 4
    # Dropout between layers (and, for the SRU, on its input transform; paper 004's code: 0.25).
    _C.MODEL.RETRIEVAL.RNN.DROPOUT = 0.25
    # The SRU's recurrent (variational) dropout (paper 004's code: 0.25).
    _C.MODEL.RETRIEVAL.RNN.RNN_DROPOUT = 0.25
    # The SRU of paper 004's code: v1 semantics with tanh and skip term, no rescaling; False: sru's current defaults.
    _C.MODEL.RETRIEVAL.RNN.SRU_V1 = True

    _C.MODEL.RETRIEVAL.TEXT_CNN = CN()
    # TextCNNSentenceEncoder (paper 001): word embedding size, the 1x1 conv of one-hot words (paper: 300).
    _C.MODEL.RETRIEVAL.TEXT_CNN.WORD_DIM = 300
    # Training-caption words seen fewer times map to <unk> (paper: every training word word2vec knows; here 1 = every training word).
    _C.MODEL.RETRIEVAL.TEXT_CNN.MIN_WORD_COUNT = 1
    # Initialize the word embeddings from PHRASEDET.TEXT's word vectors (paper: word2vec, +1-2 R@1; their size must be WORD_DIM, e.g. PHRASEDET.TEXT.WORD2VEC_DIM 300); False: Glorot uniform (paper's baseline).
    _C.MODEL.RETRIEVAL.TEXT_CNN.INIT_WORD_VECTORS = True
    # Learning-rate factor of the word embedding (its lr_factor attribute, applied by the optimizer builder). Paper code: 1e-3 with SGD base lr 0.1, an effective 1e-4 that keeps the word2vec vectors nearly fixed; default 0.1: they adapt, ten times slower than the rest (with the retrieval configs' Adam at 2e-4, 1e-3 would leave them practically frozen).
    _C.MODEL.RETRIEVAL.TEXT_CNN.WORD_LR_FACTOR = 0.1
    # Fixed caption length in words: longer captions lose their final words, shorter ones are zero-padded (paper: 32 for Flickr30K and COCO, 56 for CUHK-PEDES).
    _C.MODEL.RETRIEVAL.TEXT_CNN.MAX_LENGTH = 32
    # Position shift in training: the words start at a uniform offset in {0, ..., MAX_LENGTH - n} (paper: +5 R@1; released code); False or eval: left-aligned.
    _C.MODEL.RETRIEVAL.TEXT_CNN.POSITION_SHIFT = True
    # Bottleneck blocks per stage (paper code, "ResNet-50-like": [3, 4, 6, 1]).
    _C.MODEL.RETRIEVAL.TEXT_CNN.STAGE_DEPTHS = [3, 4, 6, 1]
    # Output channels of each stage's blocks (paper code: [256, 512, 1024, 2048]).
    _C.MODEL.RETRIEVAL.TEXT_CNN.STAGE_WIDTHS = [256, 512, 1024, 2048]
    # Stride of each stage's first block, on its width-2 conv (paper code: [1, 2, 2, 1], 32 -> 8 positions).
    _C.MODEL.RETRIEVAL.TEXT_CNN.STAGE_STRIDES = [1, 2, 2, 1]
    # A block's bottleneck width is its output width // BOTTLENECK_RATIO (ResNet and paper code: 4).
    _C.MODEL.RETRIEVAL.TEXT_CNN.BOTTLENECK_RATIO = 4
    # Hidden size of the head FC -> BN -> ReLU -> Dropout -> FC after average pooling; 0 = EMBED_DIM (paper: 2048 = EMBED_DIM).
    _C.MODEL.RETRIEVAL.TEXT_CNN.HEAD_HIDDEN_DIM = 0
    # Dropout of the head after its ReLU (paper: 0.75; code: 0.5).
    _C.MODEL.RETRIEVAL.TEXT_CNN.DROPOUT = 0.5

    _C.MODEL.RETRIEVAL.FIXED_VECTOR = CN()
    # Projection of the fixed sentence vector (PHRASEDET.TEXT.ENCODER "mean" or "fisher", whole caption): "two_layer" (paper 000) or "linear".
    _C.MODEL.RETRIEVAL.FIXED_VECTOR.PROJECTION = "two_layer"

    _C.MODEL.RETRIEVAL.SIMILARITY_NETWORK = CN()
    # Hidden sizes of the head on the element-wise product, ending in one logit (paper 000: 512 -> 256 -> 1).
    _C.MODEL.RETRIEVAL.SIMILARITY_NETWORK.HIDDEN_DIMS = [512, 256]

    _C.MODEL.RETRIEVAL.LOSS = CN()
    # "ranking" (bidirectional hinge on in-batch negatives: VSE0, VSE++, paper 000's embedding network), "logistic" (balanced pairs: paper 000's similarity network) or "infonce" (CLIP's symmetric InfoNCE with a learnable temperature; a reference, in no paper here).
    _C.MODEL.RETRIEVAL.LOSS.TYPE = "ranking"
    # LOSS.TYPE "infonce": the initial temperature; the logits are cosine / temperature (CLIP: 0.07).
    _C.MODEL.RETRIEVAL.LOSS.TEMPERATURE = 0.07
    # LOSS.TYPE "infonce": the temperature is learned (as log 1/temperature, CLIP); False keeps it fixed.
    _C.MODEL.RETRIEVAL.LOSS.LEARN_TEMPERATURE = True
    # LOSS.TYPE "infonce": the largest 1/temperature learning may reach (CLIP clamps at 100).
    _C.MODEL.RETRIEVAL.LOSS.MAX_LOGIT_SCALE = 100.0
    # Hinge margin (VSE++: 0.2; paper 000: 0.05).
    _C.MODEL.RETRIEVAL.LOSS.MARGIN = 0.2
    # Negatives per positive pair and direction: "all" (sum of hinges, VSE0), "hardest" (max of hinges, VSE++) or "topk" (the TOPK largest hinges, paper 000).
    _C.MODEL.RETRIEVAL.LOSS.NEGATIVES = "hardest"
    # Iterations at the start that sum the hinges of all negatives before NEGATIVES takes over (paper 002's "curriculum", VSE-infinity's warm-up of the max of hinges); 0 = none.
    _C.MODEL.RETRIEVAL.LOSS.WARMUP_ALL_NEGATIVES_ITERS = 0
    # K of NEGATIVES "topk" (paper 000, retrieval: 10).
    _C.MODEL.RETRIEVAL.LOSS.TOPK = 10
    # Scores the hinges compare: "cosine" (VSE++) or "euclidean" (minus the distance of the normalized embeddings, paper 000).
    _C.MODEL.RETRIEVAL.LOSS.DISTANCE = "cosine"
    # Weight of the image-anchored term (captions ranked for an image; paper 000's lambda_1).
    _C.MODEL.RETRIEVAL.LOSS.IMAGE_ANCHOR_WEIGHT = 1.0
    # Weight of the caption-anchored term (images ranked for a caption; paper 000's lambda_2: 1.5).
    _C.MODEL.RETRIEVAL.LOSS.CAPTION_ANCHOR_WEIGHT = 1.0
    # Weight of paper 000's sentence-neighbourhood term (lambda_4: 0.05): a caption closer to another caption of its image than to captions of other images.
    _C.MODEL.RETRIEVAL.LOSS.NEIGHBOURHOOD_WEIGHT = 0.0
    # Hinges summed over the positive pairs of the batch (VSE++ code) or averaged ("mean").
    _C.MODEL.RETRIEVAL.LOSS.REDUCTION = "sum"
    # A caption of the same image elsewhere in the batch is never a negative (False: the released VSE++ code, where it is).
    _C.MODEL.RETRIEVAL.LOSS.MASK_SAME_IMAGE = True
    # With several processes, negatives come from the whole global batch (embeddings gathered, gradients kept for the local part), for LOSS.TYPE "ranking" and "infonce"; False: each process's own batch.
    _C.MODEL.RETRIEVAL.LOSS.GATHER_NEGATIVES = True
    # Weight of this loss in the total (paper 001's lambda_1: 1 in its stage II, 0 in stage I; its COCO code: 2); 0 = not computed.
    _C.MODEL.RETRIEVAL.LOSS.WEIGHT = 1.0

    _C.MODEL.RETRIEVAL.INSTANCE_LOSS = CN()
    # Paper 001's instance loss: a bias-free classifier shared by both modalities, one class per DATASETS.TRAIN image, on the unnormalized features. Weight of the image term (lambda_2: 1); 0 with TEXT_WEIGHT 0 = no instance loss.
    _C.MODEL.RETRIEVAL.INSTANCE_LOSS.IMAGE_WEIGHT = 0.0
    # Weight of the caption term (lambda_3: 1; paper 001's COCO code: 0.1).
    _C.MODEL.RETRIEVAL.INSTANCE_LOSS.TEXT_WEIGHT = 0.0

    _C.INPUT.RETRIEVAL = CN()
    # Captions per training image, drawn afresh each time the image is loaded: 1 (VSE++), 2 (paper 000's neighbourhood sampling), 0 = all.
    _C.INPUT.RETRIEVAL.CAPTIONS_PER_IMAGE = 1
    # "shorter_side_crop": shorter side resized to RESIZE, then a CROP x CROP crop, random in training, centred at test (VSE++); "square": the whole image resized to CROP x CROP.
    _C.INPUT.RETRIEVAL.RESIZE_MODE = "shorter_side_crop"
    # Shorter image side after resizing (VSE++: 256).
    _C.INPUT.RETRIEVAL.RESIZE = 256
    # Side of the square image fed to the backbone (VSE++: 224).
    _C.INPUT.RETRIEVAL.CROP = 224

    _C.TEST.RETRIEVAL = CN()
    # Protocols evaluated: 1 = the whole test split (Flickr30K 1K, COCO 5K); F > 1 = F folds of consecutive images, each against its own captions, metrics averaged (COCO 1K: 5).
    _C.TEST.RETRIEVAL.FOLDS = [1]
    # Queries scored at once: bounds the evaluator's memory (CHUNK_SIZE x gallery scores).
    _C.TEST.RETRIEVAL.CHUNK_SIZE = 1024
    # Test images per batch (1: every image is embedded alone, so results do not depend on the number of processes).
    _C.TEST.RETRIEVAL.IMS_PER_BATCH = 1
    # Save the test embeddings (or, for the similarity network, the score matrix) to <OUTPUT_DIR>/inference/<dataset>/ for tools/evaluation/evaluate_retrieval.py.
    _C.TEST.RETRIEVAL.SAVE_EMBEDDINGS = True
    # Image features are the average of the image's and its horizontal flip's (paper 001); needs IMAGE_INPUT "pixels".
    _C.TEST.RETRIEVAL.FLIP_AVERAGE = False

    _C.PHRASEDET.RETRIEVAL_STAGES = CN()
    # Paper 001's two stages in one run (phrasedet/engine/staged/retrieval_stages.py): stage I with the image CNN frozen, then stage II as the config says (SOLVER.*, MODEL.RETRIEVAL.*); --resume continues in the interrupted stage.
    _C.PHRASEDET.RETRIEVAL_STAGES.ENABLED = False
    # Stage I iterations (0: no stage I, the config trains in one stage).
    _C.PHRASEDET.RETRIEVAL_STAGES.STAGE1_ITERS = 0
    # Stage I learning rate (paper 001: 0.001).
    _C.PHRASEDET.RETRIEVAL_STAGES.STAGE1_LR = 0.001
    # Stage I learning-rate decay steps (x SOLVER.GAMMA).
    _C.PHRASEDET.RETRIEVAL_STAGES.STAGE1_STEPS = []
    # Stage I weight of MODEL.RETRIEVAL.LOSS (paper 001: 0, the instance loss only; 1 gives the "only ranking loss" baseline both stages).
    _C.PHRASEDET.RETRIEVAL_STAGES.STAGE1_LOSS_WEIGHT = 0.0
    # Stage I on precomputed features of the frozen CNN (tools/data/extract_image_features.py, the same backbone and weights): much faster on CPU, the same embeddings; stage II then loads stage I's weights with the backbone of MODEL.RETRIEVAL.BACKBONE_WEIGHTS; "" = stage I on pixels.
    _C.PHRASEDET.RETRIEVAL_STAGES.STAGE1_IMAGE_FEATURES_DIR = ""
