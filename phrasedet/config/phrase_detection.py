"""``add_phrase_detection_config``: phrase localization and open-ended phrase detection (paper 003):
``MODEL.PHRASE_ROI_HEADS``, ``TEST.PHRASE_DETECTION``, ``PHRASEDET.CCA``, ``PHRASEDET.RECIPE``,
``INPUT.PHRASES``."""
from detectron2.config import CfgNode as CN

__all__ = ["add_phrase_detection_config"]


def add_phrase_detection_config(cfg):
    """Keys of ``PhraseRCNN``, its classifiers, evaluator, CCA and staged recipe."""
    _C = cfg
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
    # Cascade at inference (not in any released code): shortlist this many regions per phrase by the
    # CCA cosine, then score only those with CLASSIFIER; 0 = score every region with CLASSIFIER.
    # Needs a fitted CCA (the staged recipe loads it; it is saved in the checkpoint).
    _C.MODEL.PHRASE_ROI_HEADS.CASCADE_TOPK = 0

    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET = CN()
    # Embedding Network layer-1 size (paper 003's code: 2053, the region feature size).
    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.HIDDEN_DIM = 256
    # Shared embedding size (code: 1024).
    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.EMBED_DIM = 256
    # Ranking margin on cosine scores (code: 0.05).
    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.MARGIN = 0.05
    # Average the top K x P margin violations (code: 5).
    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.TOPK_PER_PHRASE = 5
    # Weight of the region-neighbourhood term (code: 0.1).
    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.REGION_LOSS_WEIGHT = 0.1
    # Weight of the phrase-neighbourhood term (code: 0.1).
    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.PHRASE_LOSS_WEIGHT = 0.1
    # A region is a positive for a phrase at this IoU or more (paper: 0.6).
    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.POS_IOU = 0.6
    # A region is a negative below this IoU (paper: 0.3).
    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.NEG_IOU = 0.3
    # Pair positives and negatives across the image's phrases, as the released code (False: within each phrase).
    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.POOL_PHRASES = False
    # lambda_2 of Eq. 5: 0.5 * lambda * ||W - W_init||^2 on CCA-initialized layers (code: 5e-5).
    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.CCA_L2_WEIGHT = 5e-5
    # L1 weight on CCA-initialized layers' biases (code: 1e-4).
    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.CCA_L1_BIAS_WEIGHT = 1e-4
    # CCA layers compute ((x - mu) W + b) * sigma (True, the code) or (x - mu) W * sigma + b (False, paper Eq. 4).
    _C.MODEL.PHRASE_ROI_HEADS.EMBEDDING_NET.SCALE_BIAS = True

    _C.MODEL.PHRASE_ROI_HEADS.CITE = CN()
    # CITE branch layer-1 and concept-weight hidden size (code: 2053).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.HIDDEN_DIM = 256
    # Region/phrase embedding size (code: 1024).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.EMBED_DIM = 256
    # Joint layer size after the element-wise product (code: 1024).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.JOINT_DIM = 256
    # Size of each concept branch (code: 256).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.CONCEPT_DIM = 64
    # Number of concept branches K (code: 4).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.NUM_CONCEPTS = 4
    # Positive pairs: IoU at least this (code: 0.6).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.POS_IOU = 0.6
    # Negative pairs are drawn below this IoU (code: 0.3).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.NEG_IOU = 0.3
    # Negative IoU bound used when too few regions are below NEG_IOU (code: 0.4).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.NEG_IOU_FALLBACK = 0.4
    # Negatives drawn per positive (code: 2).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.NEG_TO_POS_RATIO = 2
    # lambda_1: L1 on the pre-softmax concept weights, summed and divided by the number of phrases (code: 5e-5).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.CONCEPT_L1_WEIGHT = 5e-5
    # lambda_2 of Eq. 5 on CCA-initialized layers (code: 5e-5).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.CCA_L2_WEIGHT = 5e-5
    # L1 weight on CCA-initialized layers' biases (the external CITE code: none).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.CCA_L1_BIAS_WEIGHT = 0.0
    # CCA layers compute ((x - mu) W + b) * sigma (True, the code) or (x - mu) W * sigma + b (False, paper Eq. 4).
    _C.MODEL.PHRASE_ROI_HEADS.CITE.SCALE_BIAS = True

    # Negative phrase augmentation (QA R-CNN; paper 003 Sec. 3.3.1, Table IV: negligible effect): each training
    # phrase keeps a table of the phrases the model scores highest on its ground-truth regions, refreshed by
    # phrasedet/engine/npa_hook.py; some become hard negatives of the minibatch (phrasedet/modeling/roi_heads/negative_phrases.py).
    _C.MODEL.PHRASE_ROI_HEADS.NPA = CN()
    # Train with hard negative phrases (QA R-CNN classifier only; the paper's QA R-CNN + NPA).
    _C.MODEL.PHRASE_ROI_HEADS.NPA.ENABLED = False
    # Hard negatives kept per training phrase, hardest first; negatives are drawn uniformly among them (paper: 500).
    _C.MODEL.PHRASE_ROI_HEADS.NPA.TABLE_SIZE = 500
    # Iterations between table refreshes, also built before the first step (paper: 10K iterations; CITE code: 3 epochs).
    _C.MODEL.PHRASE_ROI_HEADS.NPA.PERIOD = 200
    # Each image of P phrases gets ceil(fraction * P) hard negatives, one per source phrase (CITE code: ceil(P / 4)).
    _C.MODEL.PHRASE_ROI_HEADS.NPA.NEGATIVES_PER_IMAGE_FRACTION = 0.25
    # Phrase pairs sharing an annotated box in at least this many training images are never hard negatives
    # of each other (paper: pairs "often annotated on the same object", count unspecified).
    _C.MODEL.PHRASE_ROI_HEADS.NPA.MIN_COOCCURRENCE = 1
    # Phrases whose head words (last tokens) are WordNet parent and child are never hard negatives of each other (paper: on; needs nltk's WordNet).
    _C.MODEL.PHRASE_ROI_HEADS.NPA.WORDNET_FILTER = True
    # Training images scored per refresh (random, seeded per refresh); 0 = all (CITE code: the validation set).
    _C.MODEL.PHRASE_ROI_HEADS.NPA.REFRESH_IMAGES = 200

    _C.TEST.PHRASE_DETECTION = CN()
    # Phrases scored at test: "dataset" (every distinct phrase of the test split, open-ended detection) or "image" (each image's own phrases: localization only).
    _C.TEST.PHRASE_DETECTION.VOCABULARY = "dataset"
    # mAP mode: "reference" (paper 003's released evaluator) or "standard" (VOC-style one-to-one matching).
    _C.TEST.PHRASE_DETECTION.MODE = "reference"
    # Write every detection to <OUTPUT_DIR>/inference/<dataset>/phrase_predictions.jsonl.
    _C.TEST.PHRASE_DETECTION.SAVE_PREDICTIONS = True
    # PPA-augmented evaluation (paper 003 Tables III, V, VI; code: test-time PPA on): also report the metrics on the test ground truth augmented with each phrase's WordNet PPA phrases (results["phrase_detection_ppa"]).
    _C.TEST.PHRASE_DETECTION.PPA = False

    # Phrase filtering (paper 003 Sec. 6.2, Table VI; phrasedet/engine/phrase_filtering.py): an image-sentence
    # retrieval model retrieves each test image's top TOP_N training sentences; a test phrase sharing no token
    # with them gets score -inf in that image (the entries stay in the ranking). On when RETRIEVAL_WEIGHTS or
    # FILE is set: the phrase-detection evaluator then reports the mAP with and without the filter.
    _C.TEST.PHRASE_FILTER = CN()
    # The retrieval model's config (a yaml of configs/retrieval/); its DATASETS.TRAIN are the sentence database.
    _C.TEST.PHRASE_FILTER.RETRIEVAL_CONFIG = ""
    # The retrieval model's trained checkpoint (its model_final.pth); "" = no retrieval model.
    _C.TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS = ""
    # KEY VALUE overrides of RETRIEVAL_CONFIG (e.g. MODEL.RETRIEVAL.BACKBONE_WEIGHTS, the CNN of a model trained on features).
    _C.TEST.PHRASE_FILTER.RETRIEVAL_OPTS = []
    # Sentences retrieved per test image (the released code's TEST.SENTENCE_FILTERING: 75; the paper: 100).
    _C.TEST.PHRASE_FILTER.TOP_N = 75
    # A saved filter (phrase_filter.json) to load instead of running the retrieval model; "" = build it.
    _C.TEST.PHRASE_FILTER.FILE = ""

    _C.PHRASEDET.CCA = CN()
    # A GT phrase instance and its best stage-1 proposal form a CCA pair when their IoU is at least this (paper 003's code: 0.6).
    _C.PHRASEDET.CCA.PAIR_IOU = 0.6
    # At most this many pairs per training image (paper 003's code: 10).
    _C.PHRASEDET.CCA.MAX_PAIRS_PER_IMAGE = 10
    # Pairs come from the first N images of DATASETS.TRAIN (in order); 0 = every image (paper 003's code).
    _C.PHRASEDET.CCA.MAX_IMAGES = 0
    # Ridge added to both covariance diagonals (paper 003's code: 1e-4).
    _C.PHRASEDET.CCA.RIDGE = 0.0001
    # Projections are scaled by canonical correlations ** POWER (normalized CCA; the code: 1, Gong et al.: 4).
    _C.PHRASEDET.CCA.POWER = 1.0
    # Output size of each stacked CCA layer (paper 003's code: layer 1 min(D_r, D_t), layer 2 1024); 0 = min of the input sizes.
    _C.PHRASEDET.CCA.DIMS = [0, 0]
    # Stacked layers the CCA classifier and the cascade shortlist score with: 1 = the paper's linear CCA.
    _C.PHRASEDET.CCA.SCORE_LAYERS = 1

    # Deep CCA (paper 003 Sec. 3.3.3; MODEL.PHRASE_ROI_HEADS.CLASSIFIER "DeepCCAClassifier"): stage 2 trains one
    # FC layer + sigmoid per view with the correlation loss on the CCA's pairs, then fits linear CCA on its outputs.
    _C.PHRASEDET.DEEP_CCA = CN()
    # Output size of each view's FC layer (paper: 1,024); 0 = min(D_r, D_t).
    _C.PHRASEDET.DEEP_CCA.OUT_DIM = 0
    # Pairs per Adam step; the full set when larger (paper: 30K at 1,024-d; built-in data: see docs/PHRASE_DETECTION.md).
    _C.PHRASEDET.DEEP_CCA.BATCH_SIZE = 100000
    # Adam steps (paper: not stated).
    _C.PHRASEDET.DEEP_CCA.ITERS = 300
    # Adam learning rate (paper: not stated).
    _C.PHRASEDET.DEEP_CCA.LR = 0.001
    # Ridge on the covariance diagonals of the loss and of the final linear CCA (paper 003's CCA code: 1e-4).
    _C.PHRASEDET.DEEP_CCA.RIDGE = 0.0001

    # Paper 003's staged recipe, run by tools/train_net.py when ENABLED (each stage in a folder of OUTPUT_DIR):
    #   stage1_detector    the phrase-aware detector (RPN, box regression, DETECTOR_CLASSIFIER) with SOLVER.*;
    #   stage2_cca         CCA over the whole training set with the stage-1 model (cca.npz);
    #   stage3_classifier  MODEL.PHRASE_ROI_HEADS.CLASSIFIER trained on the frozen stage-1 detector,
    #                      CCA-initialized when CCA_INIT (the released code trains CITE on frozen features);
    #   stage4_finetune    everything fine-tuned (the paper), when FINETUNE_ITERS > 0.
    # --resume continues in the stage that was interrupted, with the fitted CCA.
    _C.PHRASEDET.RECIPE = CN()
    # Run the staged recipe (True) or train the configured model in one stage (False).
    _C.PHRASEDET.RECIPE.ENABLED = False
    # Classifier of stage 1 (paper 003's code: a 2-way "entropy" classifier; here QA R-CNN).
    _C.PHRASEDET.RECIPE.DETECTOR_CLASSIFIER = "QARCNNClassifier"
    # A trained stage-1 checkpoint (a model_final.pth of stage1_detector): stage 1 is skipped.
    _C.PHRASEDET.RECIPE.DETECTOR_WEIGHTS = ""
    # Initialize the classifier from the stage-2 CCA: layers 1-2 of both branches (Embedding Network,
    # CITE) or the projections (the CCA classifier, which needs it).
    _C.PHRASEDET.RECIPE.CCA_INIT = True
    # Also train the classifier randomly initialized (same detector, budget and seed; folders
    # stage3_classifier_random_init ...), evaluate both and report CCA init minus random init per bucket.
    _C.PHRASEDET.RECIPE.COMPARE_RANDOM_INIT = False
    # Train that baseline in a second process beside the CCA-initialized classifier, each with half the threads
    # (phrasedet/engine/staged/baseline_process.py; one process only: with several, the baseline follows). Measured slower on
    # 2 cores than one after the other (docs/DECISIONS.md).
    _C.PHRASEDET.RECIPE.BASELINE_PROCESS = False
    # A preview (configs/cite_cca_preview.yaml, make demo): stage 3 stops before the classifiers' curves flatten, so
    # the CCA-vs-random verdict is printed as a preview that decides nothing, with the command whose recorded,
    # converged runs decide it.
    _C.PHRASEDET.RECIPE.PREVIEW = False
    # Stage 3 trains and validates on region features the frozen detector computes once per image (as the released
    # CITE code trains on precomputed features; phrasedet/modeling/roi_heads/region_cache.py); False = run the detector
    # every step (the same numbers up to float rounding).
    _C.PHRASEDET.RECIPE.REGION_CACHE = True
    # Stage-3 iterations (0: the classifier is saved and evaluated untrained).
    _C.PHRASEDET.RECIPE.CLASSIFIER_ITERS = 600
    # Stage-3 optimizer: "SGD" (SOLVER.MOMENTUM, WEIGHT_DECAY) or "Adam" (no weight decay; the CITE code: Adam 5e-5).
    _C.PHRASEDET.RECIPE.CLASSIFIER_OPTIMIZER = "SGD"
    # Stage-3 learning rate.
    _C.PHRASEDET.RECIPE.CLASSIFIER_LR = 0.01
    # Stage-3 iterations where the learning rate is multiplied by SOLVER.GAMMA.
    _C.PHRASEDET.RECIPE.CLASSIFIER_STEPS = []
    # Stage-3 model selection on a validation split (the released CITE code: the model with the best validation
    # phrase-localization accuracy), with Detectron2's EvalHook and BestCheckpointer; the selected model is tested.
    _C.PHRASEDET.RECIPE.SELECTION = CN()
    # The validation split ("" = no selection: the last iteration's model is tested, the fixed schedule).
    _C.PHRASEDET.RECIPE.SELECTION.DATASET = ""
    # Evaluate the validation split every PERIOD iterations (and at the end of each stage-3 phase).
    _C.PHRASEDET.RECIPE.SELECTION.PERIOD = 100
    # The criterion, a key of the flattened results (the released code: validation localization accuracy).
    _C.PHRASEDET.RECIPE.SELECTION.METRIC = "phrase_detection/loc_acc"
    # "max" or "min".
    _C.PHRASEDET.RECIPE.SELECTION.MODE = "max"
    # Phrases asked at validation: "image" (each image's own: localization accuracy, fast) or "dataset".
    _C.PHRASEDET.RECIPE.SELECTION.VOCABULARY = "image"
    # Stop a stage-3 phase once this many evaluations in a row bring no better validation model (the released
    # CITE code: 5 epochs); its iterations are then a cap. 0 = every phase runs its whole budget.
    _C.PHRASEDET.RECIPE.SELECTION.PATIENCE = 0
    # A second stage-3 phase from the selected model of the first (the released code: SGD at 5e-6 after Adam at
    # 5e-5), in stage3b_classifier; it keeps the first phase's model unless it beats it on validation.
    _C.PHRASEDET.RECIPE.SECOND_PHASE = CN()
    # Its iterations (0 = no second phase).
    _C.PHRASEDET.RECIPE.SECOND_PHASE.ITERS = 0
    # Its optimizer: "SGD" (SOLVER.MOMENTUM, no weight decay) or "Adam".
    _C.PHRASEDET.RECIPE.SECOND_PHASE.OPTIMIZER = "SGD"
    # Its learning rate (the released code: 5e-6).
    _C.PHRASEDET.RECIPE.SECOND_PHASE.LR = 5e-6
    # Stage-4 (fine-tune everything) iterations; 0 skips stage 4 (the released code).
    _C.PHRASEDET.RECIPE.FINETUNE_ITERS = 0
    # Stage-4 optimizer: "SGD" or "Adam".
    _C.PHRASEDET.RECIPE.FINETUNE_OPTIMIZER = "SGD"
    # Stage-4 learning rate.
    _C.PHRASEDET.RECIPE.FINETUNE_LR = 0.001
    # Stage-4 iterations where the learning rate is multiplied by SOLVER.GAMMA.
    _C.PHRASEDET.RECIPE.FINETUNE_STEPS = []

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
