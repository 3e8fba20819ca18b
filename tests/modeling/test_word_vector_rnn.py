"""Paper 004's text path: an SRU (or GRU) over fixed word vectors."""
import logging

import numpy as np
import pytest
import torch
from gensim.models import KeyedVectors

from phrasedet.modeling.sentence_encoders import WordVectorRNNSentenceEncoder


def _kv(words=("red", "cross", "left", "caracal"), dim=4, seed=0):
    kv = KeyedVectors(dim)
    kv.add_vectors(list(words), np.random.RandomState(seed).randn(len(words), dim).astype(np.float32))
    return kv


def _encoder(rnn_type, kv=None, **kw):
    torch.manual_seed(0)
    kw = {"num_layers": 2, "dropout": 0.0, "rnn_dropout": 0.0, **kw}
    return WordVectorRNNSentenceEncoder(kv or _kv(), hidden_dim=6, rnn_type=rnn_type, **kw).eval()


@pytest.mark.parametrize("rnn_type", ["sru", "gru"])
def test_a_caption_in_a_padded_batch_is_encoded_as_alone(rnn_type):
    enc = _encoder(rnn_type)
    batch = enc(["red cross", "the red cross on the left", "caracal"])
    assert batch.shape == (3, 6)
    for i, caption in enumerate(["red cross", "the red cross on the left", "caracal"]):
        assert torch.allclose(batch[i], enc([caption])[0], atol=1e-6)


def test_gru_output_is_the_last_hidden_state_over_the_word_vectors():
    kv = _kv()
    enc = _encoder("gru", kv)
    x = torch.as_tensor(np.stack([kv["red"], kv["cross"]]))[:, None]  # [T=2, 1, K]
    _, hidden = enc.rnn(x)
    assert torch.allclose(enc(["Red cross."])[0], hidden[-1, 0], atol=1e-6)


def test_sru_uses_the_released_codes_v1_options():
    enc = _encoder("sru", num_layers=4)
    layer = enc.rnn.rnn_lst[0]
    assert len(enc.rnn.rnn_lst) == 4 and layer.v1 and layer.activation == "tanh" and layer.has_skip_term and not layer.rescale


def test_unknown_words_are_zero_vectors_counted_and_logged(caplog):
    enc = _encoder("gru")
    with caplog.at_level(logging.WARNING):
        out = enc(["the red cross", "..."])
    assert (enc.oov_words, enc.empty_captions) == (1, 1)  # "the"; "..." has no word
    assert "1 word(s) without a word vector and 1 caption(s) without any word" in caplog.text
    # a caption of unknown words only equals a caption without any word... after as many zero steps
    assert torch.allclose(enc(["zzz"])[0], out[1], atol=1e-6)


def test_any_word_the_table_knows_works_even_if_no_training_caption_had_it():
    enc = _encoder("sru")
    caracal, unknown = enc(["caracal", "waxwing"])
    assert enc.oov_words == 1 and not torch.allclose(caracal, unknown)


def test_loading_a_checkpoint_made_with_other_word_vectors_is_an_error():
    state = _encoder("gru", _kv(seed=1)).state_dict()
    with pytest.raises(ValueError, match="trained with other words than PHRASEDET.TEXT's word vectors"):
        _encoder("gru", _kv(seed=2)).load_state_dict(state)
    _encoder("gru", _kv(seed=1)).load_state_dict(state)


def test_unknown_rnn_type():
    with pytest.raises(ValueError, match="RNN.TYPE must be one of"):
        _encoder("lstm")
