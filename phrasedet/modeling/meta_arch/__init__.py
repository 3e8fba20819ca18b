"""Meta-architectures, one per task family; importing registers them."""
from .image_text_embedding import ImageTextEmbedding
from .phrase_rcnn import PhraseRCNN
