"""The built-in worlds a comparison runs in (issue 42; docs/DATA.md, "The long-tailed language").

Both worlds have the same scenes, images and boxes. What differs is the language their captions,
phrases and referring expressions are written in (:mod:`phrasedet.data.synthetic.language`), and
the word vectors that read it:

* ``v3`` (the default): version 3's language, one name per value. The configs already name its
  datasets, and the comparison's ``--word-vectors`` gives the vectors (the project's: word2vec
  trained on the built-in captions). Its overrides are empty, so its records stay valid.
* ``long_tail``: several WordNet-related names per value, drawn with a Zipf-like frequency, with
  some names held out of training. It uses the real GloVe 6B 50-d vectors, because word2vec
  trained on 3,000 synthetic captions has no vector for a held-out name. The phrase classifiers'
  branches are then 50 wide: the CCA's width is min(region 261, phrase 50), and random- and
  CCA-initialized networks keep the same shape, as in version 3.

A world gives every run of a comparison the ``KEY VALUE`` overrides that put the run in it
(:meth:`World.phrase_detection_opts`, :meth:`World.retrieval_opts`). The comparison's own
overrides come after the world's and win.
"""
from dataclasses import dataclass
from typing import List, Tuple

from phrasedet.data.datasets.builtin import builtin_name

__all__ = ["World", "WORLDS", "get_world", "add_world_argument"]


@dataclass(frozen=True)
class World:
    """A built-in world: its name, the language of its datasets, the ``KEY VALUE`` overrides of
    its word vectors, and the phrase classifiers' branch width (0: the configs')."""

    name: str
    language: str
    word_vectors: Tuple = ()
    branch_dim: int = 0

    @property
    def default(self) -> bool:
        """Whether the configs already run in this world (no overrides)."""
        return self.language == "v3" and not self.word_vectors and not self.branch_dim

    @property
    def suffix(self) -> str:
        """Appended to a comparison's output and record folders: ``""`` for the default world."""
        return "" if self.default else f"_{self.name}"

    def dataset(self, name: str) -> str:
        """The registered built-in split ``name`` (e.g. ``"flickr30k_entities_val"``) of this world."""
        return builtin_name(name, self.language)

    def phrase_detection_opts(self) -> List:
        """Overrides for a recipe config (configs/*.yaml) in this world: its grounding splits, the
        split that selects stage 3's model, the word vectors and the classifiers' branch width."""
        if self.default:
            return []
        opts = ["DATASETS.TRAIN", f"('{self.dataset('flickr30k_entities_train')}',)",
                "DATASETS.TEST", f"('{self.dataset('flickr30k_entities_test')}',)",
                "PHRASEDET.RECIPE.SELECTION.DATASET", self.dataset("flickr30k_entities_val"), *self.word_vectors]
        for head in ("EMBEDDING_NET", "CITE") if self.branch_dim else ():
            opts += [f"MODEL.PHRASE_ROI_HEADS.{head}.HIDDEN_DIM", self.branch_dim,
                     f"MODEL.PHRASE_ROI_HEADS.{head}.EMBED_DIM", self.branch_dim]
        return opts

    def caption_splits(self) -> Tuple[str, str, str]:
        """This world's caption datasets: (train, val, test)."""
        return tuple(self.dataset(f"flickr30k_captions_{s}") for s in ("train", "val", "test"))

    def retrieval_opts(self) -> List:
        """Overrides for a retrieval config (configs/retrieval/*.yaml) in this world: its caption
        splits and word vectors (the validation split is the comparison's to set)."""
        if self.default:
            return []
        train, _, test = self.caption_splits()
        return ["DATASETS.TRAIN", f"('{train}',)", "DATASETS.TEST", f"('{test}',)", *self.word_vectors]


WORLDS = {
    "v3": World("v3", "v3"),
    "long_tail": World("long_tail", "long_tail", ("PHRASEDET.TEXT.WORD_VECTORS", "glove_6b_50d"), branch_dim=50),
}


def get_world(name: str) -> World:
    if name not in WORLDS:
        raise KeyError(f"no built-in world {name!r} (known: {', '.join(WORLDS)})")
    return WORLDS[name]


def add_world_argument(parser) -> None:
    """``--world {v3,long_tail}``: the built-in world every run of a comparison is in."""
    parser.add_argument("--world", default="v3", choices=list(WORLDS),
                        help="the built-in world (phrasedet/engine/comparison/worlds.py): v3 (default) or long_tail, "
                             "the same scenes in the long-tailed language with GloVe 6B 50-d vectors")
