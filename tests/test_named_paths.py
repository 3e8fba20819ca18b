"""phrasedet/utils/named_paths.py: NAME=PATH values of the probe tools, and what a bad one says."""
import pytest

from phrasedet.utils.named_paths import named_paths


def test_names_and_paths_in_order_the_path_may_hold_an_equals_sign():
    assert named_paths(["a=x", "b=y=z"], "--run") == [("a", "x"), ("b", "y=z")]
    assert named_paths(None, "--run") == [] and named_paths([], "--run") == []


@pytest.mark.parametrize("values, message", [
    (["x"], "--run takes NAME=PATH, got 'x'"),
    (["=x"], "--run takes NAME=PATH, got '=x'"),
    (["a="], "--run takes NAME=PATH, got 'a='"),
    (["a=x", "b=y", "a=z"], "--run: each NAME once, got ['a', 'b', 'a']"),
])
def test_a_bad_value_names_the_flag(values, message):
    with pytest.raises(SystemExit) as error:
        named_paths(values, "--run")
    assert str(error.value) == message
