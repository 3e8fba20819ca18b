"""Meta-architectures, one per task family; importing registers them: ``PhraseRCNN`` (phrase
detection), ``ImageTextEmbedding`` (retrieval), ``DSVELoc`` (the pointing game), and
``MultiLabelImageClassifier`` (the built-in CNN's pretraining, the stand-in for ImageNet)."""
from .dsve_loc import DSVELoc
from .image_classifier import MultiLabelImageClassifier
from .image_text_embedding import ImageTextEmbedding
from .phrase_rcnn import PhraseRCNN
