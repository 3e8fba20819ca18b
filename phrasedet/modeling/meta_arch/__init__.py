"""Meta-architectures; importing registers them."""
from .phrase_rcnn import PhraseRCNN
