"""Dataset loaders (Flickr30K Entities, ReferIt) and their registration. Importing registers the builtin names."""
from .builtin import builtin_dataset_root, datasets_root, register_all_builtin
from .common import BadAnnotationError
from .flickr30k_entities import (
    load_flickr30k_entities,
    parse_annotation_xml,
    parse_sentence_line,
    parse_sentences_file,
    read_unrelated_captions,
)
from .referit import load_referit
from .register import EVALUATOR_TYPE, register_flickr30k_entities, register_referit

register_all_builtin()
