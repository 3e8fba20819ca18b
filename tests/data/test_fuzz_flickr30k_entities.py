"""Fuzz tests (tests/fuzz.py) of the Flickr30K Entities readers: damaged Sentences, Annotations,
split-list and UNRELATED_CAPTIONS files load, or fail with a BadFileError naming the file."""
from hypothesis import given

from phrasedet.data.datasets import parse_annotation_xml, parse_sentences_file, read_unrelated_captions
from phrasedet.data.datasets.common import read_id_list
from tests.data.flickr_fixture import CAPTIONS, XML
from tests.fuzz import check_reader, damaged_bytes, fuzz_settings, write_file

SENTENCES = ("\n".join(CAPTIONS) + "\n").encode()


@fuzz_settings
@given(data=damaged_bytes(SENTENCES))
def test_sentences_file(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "Sentences/1000092795.txt", data)
    check_reader(lambda: parse_sentences_file(path), path)


@fuzz_settings
@given(data=damaged_bytes(XML.encode()))
def test_annotation_xml(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "Annotations/1000092795.xml", data)
    check_reader(lambda: parse_annotation_xml(path), path)


@fuzz_settings
@given(data=damaged_bytes(b"1000092795\n1001773457\n"))
def test_split_list(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "train.txt", data)
    check_reader(lambda: read_id_list(path), path)


@fuzz_settings
@given(data=damaged_bytes(b"# image sentence\n1000092795 2\n1001773457 5\n"))
def test_unrelated_captions(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "UNRELATED_CAPTIONS", data)
    check_reader(lambda: read_unrelated_captions(path), path)
