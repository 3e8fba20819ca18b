"""Meta-architectures, one per task family; importing registers them: ``PhraseRCNN`` (phrase
detection), ``ImageTextEmbedding`` (retrieval), ``DSVELoc`` (the pointing game)."""
from .dsve_loc import DSVELoc
from .image_text_embedding import ImageTextEmbedding
from .phrase_rcnn import PhraseRCNN
