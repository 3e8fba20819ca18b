"""tools/evaluation/evaluate_retrieval.py: the in-loop numbers from the saved files, and errors naming the
file and the key or the shape mismatch."""
import json
import zipfile

import numpy as np
import pytest

from phrasedet.evaluation import EMBEDDINGS_FILE, SCORES_FILE, RetrievalEvaluator

from .retrieval_toy import RETRIEVAL_TOY, NegativeSquaredDistance, load_tool, register_retrieval_toy, toy_arrays
from .test_retrieval_evaluator import _run

FOLDS = ["--folds", "1", "2", "3"]


@pytest.fixture(scope="module")
def tool():
    return load_tool("evaluate_retrieval")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """In-loop results and files: dot product (embeddings) and a custom scorer (score matrix)."""
    register_retrieval_toy()
    root = tmp_path_factory.mktemp("retrieval_saved")
    dot = _run(RetrievalEvaluator(RETRIEVAL_TOY, folds=(1, 2, 3), chunk_size=5, output_dir=str(root / "dot")))
    scored = _run(RetrievalEvaluator(RETRIEVAL_TOY, folds=(1, 2, 3), scorer=NegativeSquaredDistance(),
                                     output_dir=str(root / "scored")))
    return {"dot": dot, "scored": scored, "embeddings": str(root / "dot" / EMBEDDINGS_FILE),
            "scores": str(root / "scored" / SCORES_FILE), "root": root}


def _exit_message(tool, argv) -> str:
    with pytest.raises(SystemExit) as e:
        tool.main(argv)
    return str(e.value.code)


def test_embeddings_file_gives_the_in_loop_numbers(tool, saved, tmp_path, capsys):
    out = tmp_path / "results.json"
    results = tool.main(["--embeddings", saved["embeddings"], *FOLDS, "--chunk-size", "5", "--output", str(out)])
    assert results == saved["dot"] and json.loads(out.read_text()) == saved["dot"]
    printed = capsys.readouterr().out
    assert "(12 images, 18 captions)" in printed and "| 3 folds (mean) |" in printed


def test_scores_file_gives_the_in_loop_numbers_whatever_the_chunk(tool, saved):
    for chunk in ("1", "7", "1000"):
        assert tool.main(["--scores", saved["scores"], *FOLDS, "--chunk-size", chunk]) == saved["scored"]


def test_bare_matrix_with_caption_to_image_or_dataset(tool, saved, tmp_path):
    with np.load(saved["scores"]) as f:
        np.save(tmp_path / "sims.npy", f["scores"])
    np.save(tmp_path / "c2i.npy", toy_arrays()[2])
    by_file = tool.main(["--scores", str(tmp_path / "sims.npy"), "--caption-to-image", str(tmp_path / "c2i.npy"),
                         *FOLDS])
    by_dataset = tool.main(["--scores", str(tmp_path / "sims.npy"), "--dataset", RETRIEVAL_TOY, *FOLDS])
    assert by_file == by_dataset == saved["scored"]  # the toy's scores are exact: paired == matrix entries


def _rewrite(src, dst, drop=(), **replace):
    """Copy the .npz ``src`` to ``dst`` without the keys ``drop`` and with ``replace``d arrays."""
    with np.load(src) as f:
        arrays = {k: f[k] for k in f.files if k not in drop}
    arrays.update(replace)
    np.savez(dst, **arrays)
    return str(dst)


def test_bad_embeddings_files_name_the_file_and_key(tool, saved, tmp_path):
    path = _rewrite(saved["embeddings"], tmp_path / "no_captions.npz", drop=("captions",))
    assert _exit_message(tool, ["--embeddings", path]) == \
        f"error: {path}: missing key 'captions' (the file holds ['caption_to_image', 'image_ids', 'images'])"
    path = _rewrite(saved["embeddings"], tmp_path / "short.npz", caption_to_image=np.zeros(17, np.int64))
    assert _exit_message(tool, ["--embeddings", path]) == \
        f"error: {path}: key 'caption_to_image': caption_to_image has 17 entries for 18 captions"
    path = _rewrite(saved["embeddings"], tmp_path / "dims.npz", captions=np.zeros((18, 5), np.float32))
    assert f"{path}: key 'captions': embedding size 5 differs from the images' (6)" in _exit_message(
        tool, ["--embeddings", path])
    path = _rewrite(saved["embeddings"], tmp_path / "ids.npz", image_ids=np.array(["a", "b"]))
    assert f"{path}: key 'image_ids': has 2 entries, but there are 12 images" in _exit_message(
        tool, ["--embeddings", path])
    (tmp_path / "junk.npz").write_text("not numpy")
    assert f"{tmp_path / 'junk.npz'}: not a numpy file" in _exit_message(
        tool, ["--embeddings", str(tmp_path / "junk.npz")])


def test_bad_scores_files_name_the_file_and_mismatch(tool, saved, tmp_path):
    path = _rewrite(saved["scores"], tmp_path / "no_c2i.npz", drop=("caption_to_image",))
    assert _exit_message(tool, ["--scores", path]) == \
        f"error: {path}: missing key 'caption_to_image': give --caption-to-image or --dataset"
    assert tool.main(["--scores", path, "--dataset", RETRIEVAL_TOY, *FOLDS]) == saved["scored"]
    path = _rewrite(saved["scores"], tmp_path / "gt.npz", gt_scores=np.zeros(5, np.float32))
    assert f"{path}: key 'gt_scores': has 5 entries, but there are 18 columns (captions) in 'scores'" in \
        _exit_message(tool, ["--scores", path])
    path = _rewrite(saved["scores"], tmp_path / "rows.npz", scores=np.zeros((11, 18), np.float32))
    assert f"{path}: key 'caption_to_image': caption_to_image values must lie in [0, 11)" in \
        _exit_message(tool, ["--scores", path])
    short = _rewrite(saved["scores"], tmp_path / "c2i_len.npz", caption_to_image=np.zeros(17, np.int64))
    assert f"{short}: key 'caption_to_image': caption_to_image has 17 entries for 18 captions" in \
        _exit_message(tool, ["--scores", short])
    path = _rewrite(path, tmp_path / "rows_only.npz", drop=("caption_to_image", "image_ids"))
    assert f"{path}: 11 images x 18 captions, but dataset '{RETRIEVAL_TOY}' has 12 images x 18 captions" in \
        _exit_message(tool, ["--scores", path, "--dataset", RETRIEVAL_TOY])
    np.save(tmp_path / "c2i_short.npy", np.zeros(3, np.int64))
    assert f"{tmp_path / 'c2i_short.npy'}: caption_to_image has 3 entries for 18 captions" in _exit_message(
        tool, ["--scores", saved["scores"], "--caption-to-image", str(tmp_path / "c2i_short.npy")])
    shifted = np.roll(toy_arrays()[2], 1)
    np.save(tmp_path / "c2i_other.npy", shifted)
    assert f"{saved['scores']}: key 'caption_to_image' differs from {tmp_path / 'c2i_other.npy'}" in _exit_message(
        tool, ["--scores", saved["scores"], "--caption-to-image", str(tmp_path / "c2i_other.npy")])
    path = _rewrite(saved["scores"], tmp_path / "ids.npz", image_ids=np.array([f"x{n}" for n in range(12)]))
    assert f"{path}: key 'image_ids' differs from the image ids of dataset '{RETRIEVAL_TOY}' at 12 entries, " \
        "first at entry 0: 'x0' vs 'img00'" in _exit_message(tool, ["--scores", path, "--dataset", RETRIEVAL_TOY])
    np.save(tmp_path / "cube.npy", np.zeros((2, 3, 4)))
    assert "a score matrix must be a 2-D float array" in _exit_message(tool, ["--scores", str(tmp_path / "cube.npy")])


def test_an_interrupted_scores_file_is_deleted(saved, tmp_path):
    """The streamed matrix is a valid .npz when complete, and removed when scoring fails half-way."""
    with zipfile.ZipFile(saved["scores"]) as z:
        assert sorted(z.namelist()) == ["caption_to_image.npy", "gt_scores.npy", "image_ids.npy", "scores.npy"]

    class FailsOnSecondBlock(NegativeSquaredDistance):
        calls = 0

        def pairwise(self, images, captions):
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("out of memory")
            return super().pairwise(images, captions)

    with pytest.raises(RuntimeError, match="out of memory"):
        _run(RetrievalEvaluator(RETRIEVAL_TOY, scorer=FailsOnSecondBlock(), chunk_size=5, output_dir=str(tmp_path)))
    assert not (tmp_path / SCORES_FILE).exists()
