"""phrasedet/engine/comparison/protocol.py's word vectors: --word-vectors makes every run read one file, and
records are keyed by the vectors' fingerprint, the same whether word2vec was trained here or its
vectors were read from a file (word2vec differs across CPUs in its last bits: docs/TRAINING.md)."""
import argparse
import glob
import json
import os
from argparse import Namespace

import pytest

from phrasedet.engine.comparison.protocol import add_word_vectors_argument, run_opts, word_vectors_digest, word_vectors_line
from phrasedet.engine.comparison.runs import ROOT
from phrasedet.text.word_vectors import keyed_vectors_fingerprint, load_word_vectors

VSE0 = os.path.join(ROOT, "configs", "retrieval", "vse0.yaml")
KEPT = os.path.join(ROOT, "results", "word_vectors", "builtin_word2vec.bin")


def test_run_opts_put_the_file_first_and_drop_a_leading_separator(tmp_path):
    assert run_opts(Namespace(word_vectors="", opts=["--", "SEED", "3"])) == ["SEED", "3"]
    assert run_opts(Namespace(word_vectors="", opts=["SEED", "--"])) == ["SEED", "--"]
    path = tmp_path / "w.bin"
    path.write_bytes(b"")
    assert run_opts(Namespace(word_vectors=str(path), opts=["PHRASEDET.TEXT.WORD_VECTORS", "word2vec"])) == [
        "PHRASEDET.TEXT.WORD_VECTORS", "file", "PHRASEDET.TEXT.WORD_VECTORS_PATH", str(path),
        "PHRASEDET.TEXT.WORD_VECTORS_FORMAT", "word2vec_binary", "PHRASEDET.TEXT.WORD_VECTORS", "word2vec"]
    with pytest.raises(FileNotFoundError, match=f"--word-vectors: no file {tmp_path}/missing.bin"):
        run_opts(Namespace(word_vectors=str(tmp_path / "missing.bin"), opts=[]))


def test_the_word_vectors_option_and_the_line_a_comparison_prints():
    parser = argparse.ArgumentParser(prog="compare")
    add_word_vectors_argument(parser)
    assert parser.parse_args([]).word_vectors == "" and parser.parse_args(["--word-vectors", "w.bin"]).word_vectors == "w.bin"
    assert ("--word-vectors PATH a word2vec binary file every run reads (the project's: "
            "results/word_vectors/builtin_word2vec.bin); default: word2vec trained here" in " ".join(parser.format_help().split()))
    assert word_vectors_line(Namespace(word_vectors=""), VSE0, [], "ab12") == "word vectors: word2vec trained here (fingerprint ab12)"
    assert word_vectors_line(Namespace(word_vectors=""), VSE0, ["PHRASEDET.TEXT.WORD_VECTORS", "glove_6b_50d"], "cd") == (
        "word vectors: glove_6b_50d (fingerprint cd)")
    assert word_vectors_line(Namespace(word_vectors=KEPT), VSE0, [], "ef") == f"word vectors: {KEPT} (fingerprint ef)"


@pytest.mark.usefixtures("builtin_root")
def test_trained_and_read_from_a_file_the_same_vectors_have_one_fingerprint(tmp_path):
    quick = ["PHRASEDET.TEXT.WORD2VEC_EPOCHS", "1"]
    trained = word_vectors_digest(VSE0, quick)
    cached = glob.glob(os.path.join(os.environ["PHRASEDET_CACHE"], "word_vectors", "*.bin"))
    kv = next(kv for kv in map(lambda p: load_word_vectors(p, fmt="word2vec_binary"), cached)
              if keyed_vectors_fingerprint(kv) == trained)
    same, other = tmp_path / "same.bin", tmp_path / "other.bin"
    kv.save_word2vec_format(str(same), binary=True)
    assert word_vectors_digest(VSE0, run_opts(Namespace(word_vectors=str(same), opts=quick))) == trained
    kv.vectors[len(kv) // 2, 0] += 1e-6  # one value, in its last bits
    kv.save_word2vec_format(str(other), binary=True)
    assert word_vectors_digest(VSE0, run_opts(Namespace(word_vectors=str(other), opts=quick))) != trained


def test_every_project_record_was_made_with_the_kept_word_vectors():
    """The records in results/ are the project's: every one names the kept file's vectors."""
    kept = keyed_vectors_fingerprint(load_word_vectors(KEPT, fmt="word2vec_binary"))
    records = glob.glob(os.path.join(ROOT, "results", "*_compare", "**", "record.json"), recursive=True)
    assert len(records) >= 31
    assert {path: json.load(open(path)).get("word_vectors") for path in records} == {path: kept for path in records}
