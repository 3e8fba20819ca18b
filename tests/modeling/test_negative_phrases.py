"""Negative phrase augmentation (phrasedet/modeling/roi_heads/negative_phrases.py and
phrasedet/engine/npa_hook.py): the table and its false-negative filters on hand cases, the targets
of appended negatives, and short training runs that refresh the table, resume and repeat exactly."""
import math
import os

import pytest
import torch
from detectron2.config import get_cfg
from detectron2.engine import HookBase
from detectron2.utils.env import seed_all_rng

from phrasedet.config import add_phrasedet_config
from phrasedet.data.ppa import WordNetUnavailable
from phrasedet.engine import PhrasedetTrainer
from phrasedet.engine import npa_hook
from phrasedet.engine.npa_hook import NegativePhraseHook
from phrasedet.modeling.roi_heads.negative_phrases import (NegativePhraseTable, WordNetHypernyms, append_negative_targets,
                                                           coannotated_pairs, draw_negatives, head_word, hypernym_pairs,
                                                           negatives_per_image)

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
FAKE_HIERARCHY = {"man": {"person", "organism"}, "woman": {"person", "organism"}, "person": {"organism"}}


def _fake_hypernyms(word):
    return FAKE_HIERARCHY.get(word, set())


def test_wordnet_parent_child_heads_are_never_hard_negatives_even_when_they_score_highest():
    vocab = ["young man", "person", "dog", "red shirt", "blue shirt", "woman"]
    excluded = hypernym_pairs(vocab, _fake_hypernyms)
    assert excluded == {frozenset(("young man", "person")), frozenset(("woman", "person"))}
    # "person" scores highest on "young man"'s regions and the reverse; identical heads ("shirt") are kept
    scores = torch.tensor([[9.0, 8.0, 1.0, 2.0, 3.0, 4.0],   # young man
                           [8.0, 9.0, 1.0, 2.0, 3.0, 4.0],   # person
                           [0.0, 0.0, 0.0, 5.0, 6.0, 0.0]])  # red shirt
    table = NegativePhraseTable.from_scores(["young man", "person", "red shirt"], vocab, scores, 10, excluded)
    assert table.rows["young man"] == ["woman", "blue shirt", "red shirt", "dog"]
    assert table.rows["person"] == ["blue shirt", "red shirt", "dog"]  # neither "young man" nor "woman"
    assert table.rows["red shirt"] == ["blue shirt", "young man", "person", "dog", "woman"]  # not itself; ties in vocab order


def test_table_keeps_the_table_size_hardest():
    vocab = ["a", "b", "c", "d"]
    table = NegativePhraseTable.from_scores(["a"], vocab, torch.tensor([[5.0, 1.0, 3.0, 2.0]]), 2)
    assert table.rows == {"a": ["c", "d"]}
    with pytest.raises(ValueError, match=r"scores \(1, 3\) do not match 1 phrases x 4 candidates"):
        NegativePhraseTable.from_scores(["a"], vocab, torch.zeros(1, 3), 2)


def test_real_wordnet_puts_person_above_man(wordnet_reader):
    hypernyms = WordNetHypernyms(wordnet_reader)
    assert "person" in hypernyms("man") and "man" not in hypernyms("person")
    assert hypernym_pairs(["old man", "person", "red shirt"], hypernyms) == {frozenset(("old man", "person"))}


@pytest.mark.usefixtures("missing_wordnet")
def test_missing_wordnet_names_the_npa_key():
    with pytest.raises(WordNetUnavailable, match=r"MODEL\.PHRASE_ROI_HEADS\.NPA\.WORDNET_FILTER True.*nltk\.downloader wordnet"):
        WordNetHypernyms()


def _record(*annotations):
    return {"annotations": [{"phrase": p, "bbox": boxes[0], "boxes": boxes} for p, boxes in annotations]}


def test_coannotated_pairs_above_the_threshold_are_excluded_below_kept():
    box, other = [0.0, 0.0, 10.0, 10.0], [20.0, 20.0, 30.0, 30.0]
    records = [
        _record(("man", [box]), ("guy", [box]), ("dog", [other])),
        _record(("man", [box]), ("guy", [box, other])),          # same object again (a chain's box)
        _record(("man", [box]), ("dog", [box]), ("guy", [other])),  # man/dog once; guy elsewhere
    ]
    assert coannotated_pairs(records, 2) == {frozenset(("man", "guy"))}
    assert coannotated_pairs(records, 1) == {frozenset(("man", "guy")), frozenset(("man", "dog"))}
    assert coannotated_pairs(records, 3) == set()


def test_ceil_fraction_of_the_phrases_get_one_new_hard_negative_each():
    assert [negatives_per_image(p, 0.25) for p in (1, 4, 5, 8, 9)] == [1, 1, 2, 2, 3]
    table = NegativePhraseTable({p: ["n1", "n2", "n3", "p1"] for p in ("p0", "p1", "p2", "p3", "p4")})
    phrases = ["p0", "p1", "p2", "p3", "p4"]
    for seed in range(5):
        g = torch.Generator().manual_seed(seed)
        sources, negatives = draw_negatives(table, phrases, 0.25, g)
        assert len(sources) == math.ceil(5 / 4) == 2 and len(set(sources)) == 2
        assert len(set(negatives)) == 2 and not set(negatives) & set(phrases)  # never an image's own phrase
    # a phrase without a row brings none; the draw is reproducible from the generator
    assert draw_negatives(NegativePhraseTable({}), phrases, 0.25) == ([], [])
    a = draw_negatives(table, phrases, 1.0, torch.Generator().manual_seed(3))
    assert a == draw_negatives(table, phrases, 1.0, torch.Generator().manual_seed(3)) and len(a[0]) == 3  # only n1..n3 are free


def test_appended_negative_is_negative_on_exactly_its_sources_sampled_foreground():
    iou = torch.tensor([[0.9, 0.6, 0.2, 0.7, 0.0], [0.1, 0.8, 0.0, 0.0, 0.3]])
    sampled = torch.tensor([[True, True, True, False, True], [True, True, False, True, True]])
    new_iou, new_sampled = append_negative_targets(iou, sampled, [0, 1, 0], fg_threshold=0.5)
    assert torch.equal(new_iou[:2], iou) and torch.equal(new_sampled[:2], sampled)
    assert torch.equal(new_iou[2:], torch.zeros(3, 5))  # every region is a negative of them
    assert new_sampled[2:].tolist() == [[True, True, False, False, False],   # region 3 has IoU 0.7 but was not sampled
                                        [False, True, False, False, False],
                                        [True, True, False, False, False]]


def test_roi_heads_score_appended_negatives_against_the_source_foreground():
    from detectron2.utils.events import EventStorage

    from tests.modeling.test_phrase_roi_heads import PHRASE_DIM, _case, _cfg, _heads

    heads = _heads(_cfg())
    images, features, proposals, targets, phrase_feats = _case()
    torch.manual_seed(1)
    plain = heads._sample(proposals, targets, [2, 1])
    torch.manual_seed(1)
    with_neg = heads._sample(proposals, targets, [2, 1], [[1], []])
    (boxes, tgt, gt, _), (boxes0, tgt0, gt0, _) = with_neg[0], plain[0]
    assert torch.equal(boxes.tensor, boxes0.tensor) and tgt.iou.shape == (3, len(boxes)) and gt.shape == (3, len(boxes), 4)
    assert torch.equal(tgt.sampled[2], tgt0.sampled[1] & (tgt0.iou[1] >= 0.5)) and tgt.sampled[2].any()
    assert torch.equal(tgt.iou[2], torch.zeros(len(boxes)))
    feats = [torch.cat([phrase_feats[0], torch.randn(1, PHRASE_DIM)]), phrase_feats[1]]
    with EventStorage():
        losses = heads.losses(images, features, proposals, targets, feats, [[1], []])
    assert all(torch.isfinite(v) for v in losses.values())



@pytest.mark.parametrize("phrase, head", [("young man", "man"), ("man", "man"), ("a red  shirt ", "shirt"), ("", ""),
                                          ("   ", "")])
def test_head_word_is_the_last_token_and_empty_for_an_empty_phrase(phrase, head):
    assert head_word(phrase) == head


class _Synset:
    """The part of an nltk synset that WordNetHypernyms reads: lemma names, (instance) hypernyms,
    and ``closure`` (every synset reachable through ``rel``, the synset itself excluded)."""

    def __init__(self, *names, parents=(), instance_of=()):
        self.names, self.parents, self.instance_of = list(names), list(parents), list(instance_of)

    def lemma_names(self):
        return self.names

    def hypernyms(self):
        return self.parents

    def instance_hypernyms(self):
        return self.instance_of

    def closure(self, rel):
        seen, todo = [], rel(self)
        while todo:
            s = todo.pop(0)
            if s not in seen:
                seen.append(s)
                todo.extend(rel(s))
        return seen


class _FakeWordNet:
    def __init__(self, synsets):
        self._synsets = synsets

    def synsets(self, word):
        return self._synsets.get(word, [])


def test_wordnet_hypernyms_are_the_lowercased_lemmas_of_the_transitive_closure_with_spaces():
    animal = _Synset("Animal", "Animate_Being")
    dog = _Synset("Dog", "domestic_dog", parents=[animal])
    terrier = _Synset("terrier", parents=[_Synset("Hunting_Dog", parents=[dog])])
    breed = _Synset("Rin_Tin_Tin", instance_of=[_Synset("Film_Star")])  # a second sense, an instance
    hypernyms = WordNetHypernyms(_FakeWordNet({"terrier": [terrier, breed]}))  # the given reader, not nltk's
    assert hypernyms("terrier") == {"hunting dog", "dog", "domestic dog", "animal", "animate being", "film star"}
    assert hypernyms("unknown") == set()


def test_coannotation_reads_the_individual_boxes_and_falls_back_to_the_bbox():
    # "men" is a chain of two people: its individual boxes, not their union bbox, meet the other phrases.
    # "guy" has no "boxes" key and "person" an empty list: each is its bbox.
    # A record without annotations counts nothing.
    left, right = [0.0, 0.0, 10.0, 10.0], [20.0, 0.0, 30.0, 10.0]
    records = [{"annotations": [{"phrase": "men", "bbox": [0.0, 0.0, 30.0, 10.0], "boxes": [left, right]},
                                {"phrase": "guy", "bbox": right},
                                {"phrase": "person", "bbox": left, "boxes": []}]},
               {"file_name": "no_annotations.jpg"}]
    assert coannotated_pairs(records, 1) == {frozenset(("men", "guy")), frozenset(("men", "person"))}


def test_table_ties_keep_the_vocabulary_order_however_many():
    # 20 equal scores: an unstable sort (std::sort beyond 16 elements) would shuffle them
    vocab = [f"n{i:02d}" for i in range(20)]
    table = NegativePhraseTable.from_scores(["n05"], vocab, torch.zeros(1, 20), 20)
    assert table.rows == {"n05": [v for v in vocab if v != "n05"]}


def test_table_state_dict_round_trip():
    table = NegativePhraseTable({"man": ("dog", "car")})
    assert table.state_dict() == {"rows": {"man": ["dog", "car"]}}
    assert NegativePhraseTable.from_state_dict({"rows": {"dog": ["cat"]}}).rows == {"dog": ["cat"]}


def test_sample_defaults_to_one_negative():
    table = NegativePhraseTable({"a": ["n1", "n2", "n3", "n4"]})
    drawn = table.sample("a")
    assert len(drawn) == 1 and drawn[0] in table.rows["a"]


@pytest.mark.parametrize("k", [0, -1])
def test_sampling_no_negative_returns_none_and_leaves_the_generator_untouched(k):
    table = NegativePhraseTable({"a": ["n1", "n2", "n3", "n4"]})
    g = torch.Generator().manual_seed(0)
    state = g.get_state()
    assert table.sample("a", k, g) == []
    assert torch.equal(g.get_state(), state)


@pytest.mark.parametrize("draw", [
    lambda table, g: table.sample("a", 2, g),
    lambda table, g: draw_negatives(table, ["a", "b"], 1.0, g),
], ids=["sample", "draw_negatives"])
def test_a_given_generator_is_the_only_randomness_used(draw):
    table = NegativePhraseTable({p: [f"n{i}" for i in range(8)] for p in ("a", "b")})
    torch.manual_seed(0)
    before = torch.get_rng_state()
    first = draw(table, torch.Generator().manual_seed(1))
    assert torch.equal(torch.get_rng_state(), before)  # torch's global RNG was not consumed
    assert draw(table, torch.Generator().manual_seed(1)) == first


def test_no_sources_appends_no_rows():
    iou = torch.tensor([[0.9, 0.1]])
    sampled = torch.tensor([[True, False]])
    new_iou, new_sampled = append_negative_targets(iou, sampled, [], fg_threshold=0.5)
    assert torch.equal(new_iou, iou) and torch.equal(new_sampled, sampled)


# ---------------------------------------------------------------- training
TINY = ["SOLVER.IMS_PER_BATCH", 2, "SOLVER.MAX_ITER", 5, "SOLVER.CHECKPOINT_PERIOD", 2, "SOLVER.STEPS", (),
        "SOLVER.WARMUP_ITERS", 1, "DATALOADER.NUM_WORKERS", 0, "DATASETS.TEST", (),
        "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1, "PHRASEDET.TEXT.WORD2VEC_DIM", 16, "MODEL.RPN.POST_NMS_TOPK_TRAIN", 30,
        "MODEL.PHRASE_ROI_HEADS.NPA.ENABLED", True, "MODEL.PHRASE_ROI_HEADS.NPA.PERIOD", 3,
        "MODEL.PHRASE_ROI_HEADS.NPA.TABLE_SIZE", 5, "MODEL.PHRASE_ROI_HEADS.NPA.REFRESH_IMAGES", 6,
        "MODEL.PHRASE_ROI_HEADS.NPA.NEGATIVES_PER_IMAGE_FRACTION", 0.5]


class _Record(HookBase):
    """Keeps the table used at every step; raises after iteration ``kill_after``."""

    def __init__(self, kill_after=None):
        self.tables, self.kill_after = {}, kill_after

    def after_step(self):
        self.tables[self.trainer.iter] = dict(self.trainer.model.negative_phrases.rows)
        if self.trainer.iter == self.kill_after:
            raise KeyboardInterrupt("killed")


def _train(out, resume=False, kill_after=None):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(ROOT, "configs", "qa_rcnn.yaml"))
    cfg.merge_from_list(TINY + ["OUTPUT_DIR", str(out)])
    cfg.freeze()
    seed_all_rng(cfg.SEED)
    trainer = PhrasedetTrainer(cfg)
    record = _Record(kill_after)
    trainer.register_hooks([record])
    trainer.resume_or_load(resume=resume)
    try:
        trainer.train()
    except KeyboardInterrupt:
        pass
    npa = next(h for h in trainer._hooks if isinstance(h, NegativePhraseHook))
    losses = {it: v for v, it in trainer.storage.history("total_loss").values()}
    negatives = [v for v, _ in trainer.storage.history("npa/negatives_per_image").values()]
    return trainer, npa, record.tables, losses, negatives


@pytest.mark.usefixtures("builtin_root")
def test_training_with_npa_refreshes_the_table_resumes_and_repeats_exactly(tmp_path, monkeypatch):
    # the WordNet filter runs on the fake hierarchy: the run is the same whatever WordNet a machine has
    monkeypatch.setattr(npa_hook, "WordNetHypernyms", lambda: _fake_hypernyms)
    trainer, npa, tables, losses, negatives = _train(tmp_path / "a")
    assert type(trainer._hooks[0]).__name__ == "IterationSeedHook" and trainer._hooks[1] is npa
    assert [it for it, _ in npa.refreshes] == [0, 3]
    assert sorted(losses) == [0, 1, 2, 3, 4] and all(math.isfinite(v) for v in losses.values())
    # an image of P <= 5 phrases gets at most ceil(P / 2) <= 3 hard negatives, fewer when some of its phrases
    # have no row (the table holds the phrases of the 6 refreshed images): every step's mean is in [0, 3], and
    # hard negatives were drawn
    assert all(0 <= n <= 3 for n in negatives) and max(negatives) >= 1
    table = tables[4]
    assert len(table) > 5 and all(0 < len(row) <= 5 for row in table.values())
    for source, row in table.items():
        assert source not in row and not any(frozenset((source, n)) in npa.excluded for n in row)
    assert tables[0] == tables[2] and trainer.model.training

    # the same run again, killed after iteration 2 and resumed from the checkpoint of iteration 1: the table
    # comes back from the checkpoint (no refresh at 2), is refreshed at 3, and everything matches run a
    _, killed_npa, killed_tables, killed_losses, _ = _train(tmp_path / "b", kill_after=2)
    assert [it for it, _ in killed_npa.refreshes] == [0] and killed_tables[0] == tables[0]
    assert [killed_losses[i] for i in range(3)] == [losses[i] for i in range(3)]
    resumed, resumed_npa, resumed_tables, resumed_losses, _ = _train(tmp_path / "b", resume=True)
    assert resumed.start_iter == 2 and resumed_npa.built_at == 3
    assert [it for it, _ in resumed_npa.refreshes] == [3]
    assert resumed_tables == {i: tables[i] for i in (2, 3, 4)}
    assert {i: resumed_losses[i] for i in (2, 3, 4)} == {i: losses[i] for i in (2, 3, 4)}
