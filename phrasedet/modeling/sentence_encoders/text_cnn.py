"""``TextCNNSentenceEncoder``: paper 001's text CNN (Zheng et al., "Dual-path convolutional
image-text embeddings with instance loss", Sec. 3.2), a ResNet-50-like 1-D CNN over word positions.

Tensor shapes for C captions (``MODEL.RETRIEVAL.TEXT_CNN``; L = ``MAX_LENGTH``, D = ``WORD_DIM``,
E = ``MODEL.RETRIEVAL.EMBED_DIM``)::

    captions (C strings)
      -> layout              [C, L]        long: word indices at their positions, 0 (<pad>) elsewhere
      -> embedding           [C, L, D]     weight[word] + bias at words, exactly 0 at padding
      -> transpose, BN       [C, D, L]     BatchNorm1d over (captions x positions), no ReLU (code)
      -> stage s = 1..S      [C, W_s, L_s] STAGE_DEPTHS[s] bottleneck blocks of STAGE_WIDTHS[s] channels;
                                           the first block has stride STAGE_STRIDES[s]: L_s = ceil(L_{s-1} / stride)
      -> mean over positions [C, W_S]      (paper code: 32 -> 8 positions, averaged, padding included)
      -> head                [C, E]        TwoLayerBranch: FC -> BN -> ReLU -> Dropout -> FC

The output is not normalized: the meta-architecture L2-normalizes, paper 001's instance-loss
classifier takes the raw features.

**Words.** A :class:`~phrasedet.text.WordVocabulary` of the training captions
(``MIN_WORD_COUNT``; index 0 ``<pad>``, 1 ``<unk>``), as :class:`GRUSentenceEncoder` builds it, with
the same fingerprint buffer: loading a checkpoint made with another vocabulary is an error. The
paper keeps only training words that word2vec knows; here every training word seen
``MIN_WORD_COUNT`` times is kept, and the words the word vectors lack keep their random rows.

**First layer.** The paper's 1x1 convolution of the one-hot sentence matrix (d -> 300, with bias) is
an ``nn.Embedding`` plus a bias vector (:class:`WordEmbedding`). A padded position is an all-zero
one-hot column, i.e. no word: the bias is added at word positions only and padding positions are
masked to exactly 0 (in the code they would get the bias, which BN's mean subtraction then removes
from all positions alike; here the bias separates words from padding). Its rows are Glorot-uniform
(the paper's random baseline, Table 5) or, with ``INIT_WORD_VECTORS``, ``PHRASEDET.TEXT``'s word
vectors for the words they know (paper: word2vec). The module has an attribute ``lr_factor``
(``WORD_LR_FACTOR``; paper code: a learning-rate multiplier of 1e-3): the optimizer builder
multiplies the learning rate of the parameters of any module with an ``lr_factor`` attribute by it,
here the embedding rows and the bias.

**Fixed length and position shift.** Captions longer than ``MAX_LENGTH`` (paper: 32) lose their
final words; shorter ones are zero-padded. In training with ``POSITION_SHIFT`` (paper: +5 R@1) the
n words start at an offset drawn uniformly from {0, ..., MAX_LENGTH - n} (the released code), i.e.
random zero padding before and after, drawn from the global torch RNG (Detectron2's seeding makes it
deterministic); in eval mode, or without ``POSITION_SHIFT``, they start at 0 ("left alignment"). A
caption without any word is one ``<unk>``, as for the GRU encoder; such captions are counted
(:attr:`empty_captions`) and logged.

**Body.** Post-activation ResNet bottleneck blocks over the 1-D signal (:class:`TextBottleneck`):
1x1 reduce -> width-2 conv -> 1x1 expand, BN after each, ReLU after the first two and after the
sum with the shortcut (identity, or 1x1 conv + BN where the channels or the length change). The
paper's "1x2 filters with length padding" need one zero of padding to keep the length; it is added
on the right, so position i sees words i and i + 1. Strides are on the width-2 conv (as
torchvision's ResNet puts them on the 3x3). Paper code: depths (3, 4, 6, 1), widths
(256, 512, 1024, 2048), strides (1, 2, 2, 1), bottleneck ratio 4.
"""
from typing import Sequence

import torch
import torch.nn.functional as F
from detectron2.config import configurable
from torch import nn

from phrasedet.text import WordVocabulary
from phrasedet.text.build import build_word_vectors

from ..two_branch import TwoLayerBranch
from .build import (
    SENTENCE_ENCODER_REGISTRY,
    check_vocab_fingerprint,
    encode_captions,
    init_embedding_from_word_vectors,
    training_word_vocabulary,
    vocab_fingerprint_buffer,
)

__all__ = ["TextCNNSentenceEncoder", "TextBottleneck", "WordEmbedding"]

_KEY = "MODEL.RETRIEVAL.TEXT_CNN."


class WordEmbedding(nn.Embedding):
    """Word indices [...] -> [..., D]: ``weight[index] + bias`` where index != 0, exactly 0 where
    index == 0 (padding); paper 001's 1x1 convolution with bias of one-hot words. Row 0 is zero and
    gets no gradient (``padding_idx``)."""

    def __init__(self, num_words: int, dim: int):
        super().__init__(num_words, dim, padding_idx=0)
        nn.init.xavier_uniform_(self.weight)
        with torch.no_grad():
            self.weight[0].zero_()
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        words = (indices != self.padding_idx).unsqueeze(-1).to(self.weight.dtype)
        return (super().forward(indices) + self.bias) * words


class TextBottleneck(nn.Module):
    """[C, in_channels, L] -> [C, out_channels, ceil(L / stride)]: post-activation bottleneck
    relu(bn(1x1 expand(relu(bn(width-2 conv(relu(bn(1x1 reduce(x))))))) + shortcut(x)); the width-2
    conv sees one zero of padding on the right, and carries the stride."""

    def __init__(self, in_channels: int, bottleneck_channels: int, out_channels: int, stride: int = 1):
        super().__init__()
        self.stride = stride
        self.conv1 = nn.Conv1d(in_channels, bottleneck_channels, 1, bias=False)
        self.norm1 = nn.BatchNorm1d(bottleneck_channels)
        self.conv2 = nn.Conv1d(bottleneck_channels, bottleneck_channels, 2, stride=stride, bias=False)
        self.norm2 = nn.BatchNorm1d(bottleneck_channels)
        self.conv3 = nn.Conv1d(bottleneck_channels, out_channels, 1, bias=False)
        self.norm3 = nn.BatchNorm1d(out_channels)
        if in_channels != out_channels or stride != 1:
            # a 1x1 conv of stride s keeps positions 0, s, 2s, ...: ceil(L / s) of them, as conv2
            self.shortcut = nn.Sequential(nn.Conv1d(in_channels, out_channels, 1, stride=stride, bias=False),
                                          nn.BatchNorm1d(out_channels))
        else:
            self.shortcut = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.norm1(self.conv1(x)))
        out = F.relu(self.norm2(self.conv2(F.pad(out, (0, 1)))))  # L + 1 -> ceil(L / stride) positions
        out = self.norm3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


def _positive_ints(values, key: str, n: int = 0) -> list:
    values = [int(v) for v in values]
    if not values or (n and len(values) != n) or any(v < 1 for v in values):
        need = f"{n} positive integers (one per stage of STAGE_DEPTHS)" if n else "positive integers, one per stage"
        raise ValueError(f"{_KEY}{key} must be {need}, got {values}")
    return values


@SENTENCE_ENCODER_REGISTRY.register()
class TextCNNSentenceEncoder(nn.Module):
    """list of C captions -> [C, embed_dim] (see the module docstring for every shape).

    Args:
        vocab: word indices.
        word_dim: word embedding size D (paper: 300).
        embed_dim: output size E.
        max_length: positions L (paper: 32).
        position_shift: random start offset in training (paper: yes).
        stage_depths, stage_widths, stage_strides: blocks, output channels and first-block stride
            of each stage (paper code: (3, 4, 6, 1), (256, 512, 1024, 2048), (1, 2, 2, 1)).
        bottleneck_ratio: a block's bottleneck width is its output width // ratio (ResNet: 4).
        head_hidden_dim: hidden size of the head; 0 = ``embed_dim``.
        dropout: dropout of the head (paper: 0.75; code: 0.5).
        word_lr_factor: the embedding's ``lr_factor`` (paper code: 1e-3).
        word_vectors: optional gensim KeyedVectors of size ``word_dim`` to initialize the
            embeddings of the words they know.
    """

    @configurable
    def __init__(self, vocab: WordVocabulary, *, embed_dim: int, word_dim: int = 300, max_length: int = 32,
                 position_shift: bool = True, stage_depths: Sequence[int] = (3, 4, 6, 1),
                 stage_widths: Sequence[int] = (256, 512, 1024, 2048), stage_strides: Sequence[int] = (1, 2, 2, 1),
                 bottleneck_ratio: int = 4, head_hidden_dim: int = 0, dropout: float = 0.5,
                 word_lr_factor: float = 1.0, word_vectors=None):
        super().__init__()
        depths = _positive_ints(stage_depths, "STAGE_DEPTHS")
        widths = _positive_ints(stage_widths, "STAGE_WIDTHS", len(depths))
        strides = _positive_ints(stage_strides, "STAGE_STRIDES", len(depths))
        if bottleneck_ratio < 1 or min(widths) // bottleneck_ratio < 1:
            raise ValueError(f"{_KEY}BOTTLENECK_RATIO must be >= 1 and at most every STAGE_WIDTHS entry {widths} "
                             f"(bottleneck width = width // ratio), got {bottleneck_ratio}")
        if max_length < 1:
            raise ValueError(f"{_KEY}MAX_LENGTH must be >= 1, got {max_length}")
        self.vocab = vocab
        self.max_length = int(max_length)
        self.position_shift = bool(position_shift)
        self.embed_dim = int(embed_dim)

        self.embedding = WordEmbedding(len(vocab), word_dim)
        if word_vectors is not None:
            init_embedding_from_word_vectors(self.embedding, vocab, word_vectors, _KEY + "WORD_DIM", "TextCNNSentenceEncoder")
        # read by the optimizer builder: this module's learning rate is multiplied by it
        self.embedding.lr_factor = float(word_lr_factor)
        self.embedding_norm = nn.BatchNorm1d(word_dim)

        stages, in_channels = [], word_dim
        for depth, width, stride in zip(depths, widths, strides):
            blocks = []
            for b in range(depth):
                blocks.append(TextBottleneck(in_channels, width // bottleneck_ratio, width, stride if b == 0 else 1))
                in_channels = width
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.head = TwoLayerBranch(in_channels, head_hidden_dim or embed_dim, embed_dim, batch_norm=True, dropout=dropout)

        self.register_buffer("vocab_fingerprint", vocab_fingerprint_buffer(vocab))
        self.empty_captions = 0

    @classmethod
    def from_config(cls, cfg):
        t = cfg.MODEL.RETRIEVAL.TEXT_CNN
        vocab = training_word_vocabulary(cfg, "TextCNNSentenceEncoder", t.MIN_WORD_COUNT)
        return {"vocab": vocab, "embed_dim": cfg.MODEL.RETRIEVAL.EMBED_DIM, "word_dim": t.WORD_DIM,
                "max_length": t.MAX_LENGTH, "position_shift": t.POSITION_SHIFT, "stage_depths": t.STAGE_DEPTHS,
                "stage_widths": t.STAGE_WIDTHS, "stage_strides": t.STAGE_STRIDES,
                "bottleneck_ratio": t.BOTTLENECK_RATIO, "head_hidden_dim": t.HEAD_HIDDEN_DIM, "dropout": t.DROPOUT,
                "word_lr_factor": t.WORD_LR_FACTOR,
                "word_vectors": build_word_vectors(cfg) if t.INIT_WORD_VECTORS else None}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        check_vocab_fingerprint(state_dict, prefix, self.vocab_fingerprint, self.vocab, _KEY + "MIN_WORD_COUNT")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def layout(self, captions) -> torch.Tensor:
        """list of C captions -> [C, MAX_LENGTH] long: each caption's word indices (at most
        MAX_LENGTH, the first ones) from its start offset on, 0 elsewhere. The offset is 0 in eval
        mode or without position shift, else uniform in {0, ..., MAX_LENGTH - n} (global torch RNG)."""
        ids, empty = encode_captions(self.vocab, captions, "TextCNNSentenceEncoder", self.empty_captions)
        self.empty_captions += empty
        out = torch.zeros((len(ids), self.max_length), dtype=torch.long)
        shift = self.position_shift and self.training
        for row, words in enumerate(ids):
            words = words[: self.max_length]
            start = int(torch.randint(self.max_length - len(words) + 1, ())) if shift else 0
            out[row, start: start + len(words)] = torch.tensor(words, dtype=torch.long)
        return out

    def forward(self, captions) -> torch.Tensor:
        """list of C caption strings -> [C, embed_dim], not normalized."""
        device = self.embedding.weight.device
        if len(captions) == 0:
            return self.embedding.weight.new_zeros((0, self.embed_dim))
        x = self.embedding(self.layout(captions).to(device))  # [C, L, D]
        x = self.embedding_norm(x.transpose(1, 2))  # [C, D, L]
        x = self.stages(x)  # [C, W_S, L_S]
        return self.head(x.mean(dim=2))  # [C, E]
