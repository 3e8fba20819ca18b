"""Dataset loaders (Flickr30K Entities, ReferIt; caption datasets for retrieval; pointing-game
splits from Visual Genome and the grounding datasets) and their registration.
Importing registers the builtin names."""
from .builtin import builtin_dataset_root, datasets_root, register_all_builtin
from .coco_captions import load_coco_karpathy, read_coco_captions
from .common import BadAnnotationError
from .files import load_json_file, read_text_lines
from .flickr30k_captions import (
    load_flickr30k_entities_captions,
    load_flickr30k_karpathy,
    load_flickr30k_token_captions,
    read_flickr30k_token_file,
)
from .flickr30k_entities import (
    load_flickr30k_entities,
    parse_annotation_xml,
    parse_sentence_line,
    parse_sentences_file,
    read_unrelated_captions,
)
from .karpathy import KarpathyImage, read_karpathy_split, select_karpathy_split
from .pretraining_detection import load_pretraining_detection
from .pointing import pointing_query, pointing_record, pointing_records_from_grounding
from .referit import load_referit
from .register import (
    DETECTION_EVALUATOR_TYPE,
    EVALUATOR_TYPE,
    IMAGE_LABELS_EVALUATOR_TYPE,
    POINTING_EVALUATOR_TYPE,
    RETRIEVAL_EVALUATOR_TYPE,
    register_caption_dataset,
    register_coco_karpathy,
    register_detection_dataset,
    register_flickr30k_captions,
    register_flickr30k_entities,
    register_grounding_pointing,
    register_image_labels_dataset,
    register_pointing_dataset,
    register_referit,
    register_visual_genome_pointing,
    register_vsepp_precomp,
)
from .visual_genome import load_visual_genome_pointing, read_coco_image_ids, read_vg_image_data
from .vsepp_precomp import load_vsepp_precomp

register_all_builtin()
