"""RetrievalEvaluator on a registered toy split: dataset order, protocols, saved files, errors."""
import logging
import os

import numpy as np
import pytest
import torch
from detectron2.data import DatasetCatalog
from detectron2.evaluation import inference_on_dataset, print_csv_format

from phrasedet.evaluation import (EMBEDDINGS_FILE, METRIC_KEYS, SCORES_FILE, RetrievalEvaluator, evaluate_retrieval,
                                  evaluate_similarity, load_embeddings, load_scores)

from .retrieval_toy import RETRIEVAL_TOY, NegativeSquaredDistance, register_retrieval_toy, toy_arrays, toy_outputs

FOLDS = (1, 2, 3)


def _run(evaluator, order=None, batch=2, outputs_of=toy_outputs):
    dicts = DatasetCatalog.get(RETRIEVAL_TOY)
    dicts = [dicts[n] for n in (order if order is not None else range(len(dicts)))]
    evaluator.reset()
    for start in range(0, len(dicts), batch):
        inputs = dicts[start:start + batch]
        evaluator.process(inputs, [outputs_of(d) for d in inputs])
    return evaluator.evaluate()


def test_results_follow_dataset_order_not_arrival_order():
    register_retrieval_toy()
    shuffled = np.random.default_rng(0).permutation(12)
    results = _run(RetrievalEvaluator(RETRIEVAL_TOY, folds=FOLDS, distributed=False), order=shuffled, batch=5)
    assert results == evaluate_retrieval(*toy_arrays(), folds=FOLDS, chunk_size=1024)
    assert list(results) == ["retrieval", "retrieval_2fold", "retrieval_3fold"]
    whole = results["retrieval"]
    assert tuple(whole) == METRIC_KEYS and 0 < whole["i2t_R@1"] < 100 and 0 < whole["t2i_R@1"] < 100
    assert results["retrieval_3fold"]["i2t_R@1"] > whole["i2t_R@1"]  # 4 images per fold: an easier gallery


def test_runs_in_detectron2_inference_and_prints_csv(caplog):
    register_retrieval_toy()

    class ToyModel(torch.nn.Module):
        def forward(self, inputs):
            return [toy_outputs(d) for d in inputs]

    dicts = DatasetCatalog.get(RETRIEVAL_TOY)
    results = inference_on_dataset(ToyModel(), [dicts[n:n + 3] for n in range(0, 12, 3)],
                                   RetrievalEvaluator(RETRIEVAL_TOY, folds=(1, 4)))
    assert results == evaluate_retrieval(*toy_arrays(), folds=(1, 4))
    with caplog.at_level(logging.INFO):
        print_csv_format(results)
    assert "copypaste: Task: retrieval_4fold" in caplog.text and "i2t_R@1,i2t_R@5" in caplog.text


def test_saves_embeddings_for_the_dot_product(tmp_path):
    register_retrieval_toy()
    _run(RetrievalEvaluator(RETRIEVAL_TOY, output_dir=str(tmp_path)))
    saved = load_embeddings(str(tmp_path / EMBEDDINGS_FILE))
    images, captions, c2i = toy_arrays()
    assert saved["image_ids"] == [d["image_id"] for d in DatasetCatalog.get(RETRIEVAL_TOY)]
    assert np.array_equal(saved["images"], images) and np.array_equal(saved["captions"], captions)
    assert np.array_equal(saved["caption_to_image"], c2i) and saved["caption_to_image"].dtype == np.int64
    assert not (tmp_path / SCORES_FILE).exists()


def test_saves_the_score_matrix_for_another_scorer(tmp_path):
    register_retrieval_toy()
    scorer = NegativeSquaredDistance()
    results = _run(RetrievalEvaluator(RETRIEVAL_TOY, folds=FOLDS, scorer=scorer, chunk_size=5,
                                      output_dir=str(tmp_path)))
    saved = load_scores(str(tmp_path / SCORES_FILE))
    images, captions, c2i = toy_arrays()
    expected = scorer.pairwise(torch.from_numpy(images), torch.from_numpy(captions)).numpy()
    assert saved["scores"].shape == (12, 18) and np.array_equal(saved["scores"], expected)
    assert np.array_equal(saved["gt_scores"], expected[c2i, np.arange(18)])
    assert np.array_equal(saved["caption_to_image"], c2i) and len(saved["image_ids"]) == 12
    assert results == evaluate_retrieval(images, captions, c2i, folds=FOLDS, scorer=scorer)
    assert results != evaluate_retrieval(images, captions, c2i, folds=FOLDS)  # not the dot product
    assert not (tmp_path / EMBEDDINGS_FILE).exists()


def test_missing_duplicate_and_unknown_images_are_errors():
    register_retrieval_toy()
    with pytest.raises(ValueError, match=r"1 of 12 test images .* were not evaluated, e.g. image_id \['img07'\]"):
        _run(RetrievalEvaluator(RETRIEVAL_TOY), order=[n for n in range(12) if n != 7])
    with pytest.raises(ValueError, match=r"evaluated more than once, e.g. image_id \['img03'\]"):
        _run(RetrievalEvaluator(RETRIEVAL_TOY), order=list(range(12)) + [3])
    with pytest.raises(ValueError, match="image_id 'nope' is not in dataset"):
        RetrievalEvaluator(RETRIEVAL_TOY).process([{"image_id": "nope"}], [{}])


def test_wrong_outputs_are_errors_naming_the_image():
    register_retrieval_toy()

    def one_caption_short(d):
        out = toy_outputs(d)
        if len(d["captions"]) == 3:
            out["caption_embeddings"] = out["caption_embeddings"][:-1]
        return out

    with pytest.raises(ValueError, match="image_id 'img03': 2 caption embeddings, but its record .* has 3 captions"):
        _run(RetrievalEvaluator(RETRIEVAL_TOY), outputs_of=one_caption_short)
    for key in ("image_embedding", "caption_embeddings"):
        with pytest.raises(ValueError) as error:
            _run(RetrievalEvaluator(RETRIEVAL_TOY), outputs_of=lambda d: {k: v for k, v in toy_outputs(d).items() if k != key})
        assert str(error.value) == f"image_id 'img00': the model output has no {key!r}"
    with pytest.raises(ValueError, match=r"image_id 'img00': 'caption_embeddings' must have shape \[n_captions, 6\]"):
        _run(RetrievalEvaluator(RETRIEVAL_TOY),
             outputs_of=lambda d: {"image_embedding": torch.zeros(6), "caption_embeddings": torch.zeros(2, 5)})



def test_outputs_of_any_float_type_are_read_as_float32_and_shapes_are_named():
    """bfloat16 (a mixed-precision model, which NumPy cannot hold) and float64 arrays are read as
    float32; an image embedding that is not 1-D, and 1-D empty caption embeddings for an image
    that has captions, are errors naming the image."""
    from phrasedet.evaluation.retrieval.evaluator import _float32

    half = _float32(torch.tensor([1.5, -2.25], dtype=torch.bfloat16, requires_grad=True), "i", "k")
    assert half.dtype == np.float32 and half.tolist() == [1.5, -2.25]
    double = _float32(np.array([[0.1]]), "i", "k")
    assert double.dtype == np.float32 and double.tolist() == [[np.float32(0.1)]]
    with pytest.raises(ValueError) as error:
        _float32(None, "img4", "caption_embeddings")
    assert str(error.value) == "image_id 'img4': the model output has no 'caption_embeddings'"
    register_retrieval_toy()
    with pytest.raises(ValueError) as error:
        _run(RetrievalEvaluator(RETRIEVAL_TOY),
             outputs_of=lambda d: {**toy_outputs(d), "image_embedding": torch.zeros(1, 6)})
    assert str(error.value) == "image_id 'img00': 'image_embedding' must have shape [D], got (1, 6)"
    with pytest.raises(ValueError) as error:
        _run(RetrievalEvaluator(RETRIEVAL_TOY),
             outputs_of=lambda d: {**toy_outputs(d), "caption_embeddings": torch.zeros(0)})
    assert str(error.value) == "image_id 'img00': 'caption_embeddings' must have shape [n_captions, 6], got (0,)"
    # an image without captions (img02, img09) may give them as a 1-D empty array
    empty = _run(RetrievalEvaluator(RETRIEVAL_TOY, folds=FOLDS), outputs_of=lambda d: {
        **toy_outputs(d), **({"caption_embeddings": np.zeros(0)} if not d["captions"] else {})})
    assert empty == evaluate_retrieval(*toy_arrays(), folds=FOLDS, chunk_size=1024)


def test_nothing_seen_gives_no_results_and_files_go_to_an_existing_folder_only_when_asked(tmp_path):
    register_retrieval_toy()
    evaluator = RetrievalEvaluator(RETRIEVAL_TOY, output_dir=str(tmp_path))
    evaluator.reset()
    assert evaluator.evaluate() == {}
    _run(RetrievalEvaluator(RETRIEVAL_TOY, output_dir=str(tmp_path), save_embeddings=False))
    assert os.listdir(tmp_path) == []
    for _ in range(2):  # the same folder at every evaluation period
        _run(RetrievalEvaluator(RETRIEVAL_TOY, output_dir=str(tmp_path)))
        assert os.listdir(tmp_path) == [EMBEDDINGS_FILE]


def test_logs_its_table_with_the_split_and_scorer_and_warns_when_nothing_was_seen(caplog):
    """The log is where a training run's user reads the numbers (Detectron2 prints no dict)."""
    from phrasedet.evaluation.retrieval.report import format_retrieval_table

    register_retrieval_toy()
    name = "phrasedet.evaluation.retrieval.evaluator"
    with caplog.at_level(logging.INFO, logger=name):
        results = _run(RetrievalEvaluator(RETRIEVAL_TOY, folds=(1, 2), scorer=NegativeSquaredDistance()))
        empty = RetrievalEvaluator(RETRIEVAL_TOY)
        empty.reset()
        assert empty.evaluate() == {}
    assert [(r.levelno, r.getMessage()) for r in caplog.records if r.name == name] == [
        (logging.INFO, f"Retrieval on {RETRIEVAL_TOY} (12 images, 18 captions, NegativeSquaredDistance), in %:\n"
                       + format_retrieval_table(results)),
        (logging.WARNING, "[RetrievalEvaluator] Did not receive valid predictions.")]


def test_a_distributed_run_gathers_to_the_main_process_and_the_others_return_nothing(monkeypatch):
    """What each process does with comm patched to a world of 2 (the real two-process run:
    test_retrieval_distributed.py)."""
    from detectron2.utils import comm

    register_retrieval_toy()
    dicts = DatasetCatalog.get(RETRIEVAL_TOY)
    other = RetrievalEvaluator(RETRIEVAL_TOY)
    other.process(dicts[6:], [toy_outputs(d) for d in dicts[6:]])
    monkeypatch.setattr(comm, "get_world_size", lambda: 2)
    monkeypatch.setattr(comm, "synchronize", lambda: None)
    monkeypatch.setattr(comm, "gather", lambda data, dst=0: [data, other._seen])
    evaluator = RetrievalEvaluator(RETRIEVAL_TOY)
    evaluator.reset()
    evaluator.process(dicts[:6], [toy_outputs(d) for d in dicts[:6]])
    assert evaluator.evaluate() == evaluate_retrieval(*toy_arrays())  # the main process: both halves
    monkeypatch.setattr(comm, "is_main_process", lambda: False)
    assert evaluator.evaluate() == {}
    alone = RetrievalEvaluator(RETRIEVAL_TOY, distributed=False)  # no gathering: each process its own images
    alone.reset()
    alone.process(dicts[:6], [toy_outputs(d) for d in dicts[:6]])
    with pytest.raises(ValueError, match="^6 of 12 test images .* were not evaluated"):
        alone.evaluate()


def test_bad_folds_and_datasets_fail_before_inference():
    register_retrieval_toy()
    with pytest.raises(ValueError, match="12 test images do not split into 5 folds"):
        RetrievalEvaluator(RETRIEVAL_TOY, folds=(1, 5))
    DatasetCatalog.register("evaltest_retrieval_no_captions", lambda: [{"image_id": "a"}])
    try:
        with pytest.raises(ValueError, match="'evaltest_retrieval_no_captions': record 0: no key 'captions'"):
            RetrievalEvaluator("evaltest_retrieval_no_captions")
    finally:
        DatasetCatalog.remove("evaltest_retrieval_no_captions")


def test_the_models_similarity_network_scores_without_autograd(tmp_path):
    from phrasedet.modeling.scorers import SimilarityNetwork

    class Recording(SimilarityNetwork):
        def pairwise(self, images, captions):
            self.grad_modes.append(torch.is_grad_enabled())
            return super().pairwise(images, captions)

        def paired(self, images, captions):
            self.grad_modes.append(torch.is_grad_enabled())
            return super().paired(images, captions)

    register_retrieval_toy()
    torch.manual_seed(0)
    net = Recording(6, hidden_dims=(5,))
    net.grad_modes = []
    results = _run(RetrievalEvaluator(RETRIEVAL_TOY, folds=FOLDS, scorer=net, chunk_size=5, output_dir=str(tmp_path)))
    assert torch.is_grad_enabled() and net.grad_modes and not any(net.grad_modes)
    saved = load_scores(str(tmp_path / SCORES_FILE))
    images, captions, c2i = toy_arrays()
    with torch.no_grad():
        expected = torch.cat([net.pairwise(torch.from_numpy(images[a:a + 5]), torch.from_numpy(captions))
                              for a in range(0, 12, 5)]).numpy()
    assert np.array_equal(saved["scores"], expected)
    assert results == evaluate_similarity(saved["scores"], c2i, FOLDS, gt_scores=saved["gt_scores"])


def test_embeddings_that_are_not_finite_are_errors_naming_the_image_key_and_row():
    """Issue 23: a NaN embedding (a diverged model) used to give NaN scores, ranked as ties."""
    register_retrieval_toy()

    def damaged(key, row, value):
        def outputs_of(d):
            out = toy_outputs(d)
            if d["image_id"] == "img03":
                out[key] = out[key].clone()
                out[key].view(-1, out[key].shape[-1])[row, 2] = value
            return out
        return outputs_of

    with pytest.raises(ValueError) as e:
        _run(RetrievalEvaluator(RETRIEVAL_TOY), outputs_of=damaged("caption_embeddings", 1, float("nan")))
    values = toy_outputs(DatasetCatalog.get(RETRIEVAL_TOY)[3])["caption_embeddings"][1].tolist()
    values[2] = float("nan")
    assert str(e.value) == (f"image_id 'img03': 'caption_embeddings' row 1: values must be finite numbers, got {values} "
                            "(1 such rows; a diverged model?)")
    with pytest.raises(ValueError, match=r"^image_id 'img03': 'image_embedding' row 0: values must be finite numbers"):
        _run(RetrievalEvaluator(RETRIEVAL_TOY), outputs_of=damaged("image_embedding", 0, float("-inf")))
    # issue 29: +inf is refused too (a check of NaN alone would rank with it)
    for key, row in (("caption_embeddings", 0), ("image_embedding", 0)):
        with pytest.raises(ValueError) as e:
            _run(RetrievalEvaluator(RETRIEVAL_TOY), outputs_of=damaged(key, row, float("inf")))
        clean = toy_outputs(DatasetCatalog.get(RETRIEVAL_TOY)[3])[key]
        values = clean.reshape(-1, clean.shape[-1])[row].tolist()
        values[2] = float("inf")
        assert str(e.value) == (f"image_id 'img03': {key!r} row {row}: values must be finite numbers, got {values} "
                                "(1 such rows; a diverged model?)")


def test_saved_embeddings_have_their_documented_types(tmp_path):
    from phrasedet.evaluation.retrieval.files import save_embeddings

    path = str(tmp_path / "e.npz")
    save_embeddings(path, [3, 4], np.ones((2, 3), np.float64), np.full((4, 3), 0.5, np.float16),
                    np.array([0, 0, 1, 1], np.int32))
    with np.load(path) as npz:
        assert npz["images"].dtype == np.float32 and npz["captions"].dtype == np.float32
        assert npz["caption_to_image"].dtype == np.int64 and npz["image_ids"].tolist() == ["3", "4"]
        assert npz["captions"].tolist() == [[0.5] * 3] * 4


def test_the_scores_writer_refuses_blocks_out_of_order_and_deletes_an_incomplete_file(tmp_path):
    from phrasedet.evaluation.retrieval.files import ScoresWriter

    path = str(tmp_path / "s.npz")
    writer = ScoresWriter(path, ["a", "b", "c"], np.array([0, 1, 2, 2]), np.zeros(4))
    for first_row, block in ((1, np.zeros((1, 4))), (0, np.zeros((1, 3)))):
        with pytest.raises(ValueError) as error:
            writer.write(first_row, block)
        assert str(error.value) == (f"{path}: expected the block of rows from 0 with 4 columns, got rows from "
                                    f"{first_row} of shape {block.shape}")
    writer.write(0, np.ones((2, 4), np.float32))
    with pytest.raises(ValueError) as error:
        writer.close()
    assert str(error.value) == f"{path}: only 2 of 3 rows were written; file deleted"
    assert not os.path.exists(path)
    writer.close()  # a second close does nothing


@pytest.mark.parametrize("num_captions", [0, 2])
def test_a_score_matrix_without_rows_is_written_with_its_header(tmp_path, num_captions):
    from phrasedet.evaluation.retrieval.files import ScoresWriter

    path = str(tmp_path / "s.npz")
    with ScoresWriter(path, [], np.zeros(num_captions, np.int64), np.zeros(num_captions)):
        pass
    with np.load(path) as npz:
        assert npz["scores"].dtype == np.float32 and npz["scores"].shape == (0, num_captions)


def test_saved_members_may_pass_the_zip64_limit(tmp_path, monkeypatch):
    """Members are written with their size unknown: without force_zip64 one above 2 GiB fails
    (here the limit is lowered to 64 bytes)."""
    import zipfile

    from phrasedet.evaluation.retrieval.files import ScoresWriter, load_scores, save_embeddings

    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 64)
    save_embeddings(str(tmp_path / "e.npz"), ["a", "b"], np.ones((2, 20)), np.ones((4, 20)), np.array([0, 0, 1, 1]))
    with ScoresWriter(str(tmp_path / "s.npz"), ["a", "b"], np.array([0, 0, 1, 1]), np.ones(4)) as writer:
        writer.write(0, np.ones((2, 4), np.float32))
    monkeypatch.undo()
    with np.load(str(tmp_path / "e.npz")) as npz:
        assert npz["images"].shape == (2, 20)
    assert load_scores(str(tmp_path / "s.npz"))["scores"].shape == (2, 4)


def test_saved_files_hold_the_documented_dtypes_whatever_the_inputs(tmp_path):
    """caption_to_image int64, embeddings float32 (the module docstring), from int32 / float64 /
    float16 inputs."""
    from phrasedet.evaluation.retrieval.files import ScoresWriter, save_embeddings

    c2i = np.array([0, 0, 1, 1], np.int32)
    save_embeddings(str(tmp_path / "e.npz"), ["a", "b"], np.ones((2, 3)), np.ones((4, 3), np.float16), c2i)
    with ScoresWriter(str(tmp_path / "s.npz"), ["a", "b"], c2i, np.ones(4)) as writer:
        writer.write(0, np.ones((2, 4), np.float32))
    with np.load(str(tmp_path / "e.npz")) as e, np.load(str(tmp_path / "s.npz")) as s:
        assert {k: e[k].dtype for k in e.files} == {"image_ids": np.dtype("<U1"), "images": np.float32,
                                                    "captions": np.float32, "caption_to_image": np.int64}
        assert (s["caption_to_image"].dtype, s["caption_to_image"].tolist()) == (np.int64, [0, 0, 1, 1])


def test_assembly_errors_count_and_name_the_images():
    register_retrieval_toy()
    evaluator = RetrievalEvaluator(RETRIEVAL_TOY)

    def seen(indices, dim=lambda n: 6):
        return [(n, np.zeros(dim(n), np.float32), np.zeros((0, dim(n)), np.float32)) for n in indices]

    with pytest.raises(ValueError) as error:
        evaluator._assemble(seen(list(range(12)) + list(range(7))))
    assert str(error.value) == (f"7 test images of {RETRIEVAL_TOY!r} were evaluated more than once, e.g. image_id "
                                "['img00', 'img01', 'img02', 'img03', 'img04']")
    with pytest.raises(ValueError) as error:
        evaluator._assemble(seen(range(6)))
    assert str(error.value) == (f"6 of 12 test images of {RETRIEVAL_TOY!r} were not evaluated, e.g. image_id "
                                "['img06', 'img07', 'img08', 'img09', 'img10']")
    with pytest.raises(ValueError) as error:
        evaluator._assemble(seen(range(11)))  # the last one missing
    assert str(error.value) == f"1 of 12 test images of {RETRIEVAL_TOY!r} were not evaluated, e.g. image_id ['img11']"
    with pytest.raises(ValueError) as error:
        evaluator._assemble(seen(range(12), dim=lambda n: 4 if n == 5 else 6))
    assert str(error.value) == "images have embeddings of different sizes [4, 6]"
