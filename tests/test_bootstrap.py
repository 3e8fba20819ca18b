"""Set-up's report of pip's output (tools/setup/pip_report.awk): pip's false alarm about
sal-detectron2's version pins becomes one note, other conflicts stay visible as warnings."""
import subprocess
from .tool_runs import tool_path

AWK = tool_path("pip_report.awk")


def _report(text):
    return subprocess.run(["awk", "-f", AWK], input=text, capture_output=True, text=True, check=True).stdout


def test_sal_detectron2_pins_become_one_note_and_nothing_reads_as_an_error():
    out = _report(
        "ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. "
        "This behaviour is the source of the following dependency conflicts.\n"
        "sal-detectron2 0.7.2 requires numpy<2, but you have numpy 2.3.1 which is incompatible.\n"
        "sal-detectron2 0.7.2 requires iopath<0.1.10, but you have iopath 0.1.10 which is incompatible.\n"
    )
    assert "ERROR" not in out
    assert out.splitlines() == ["[bootstrap] note: pip lists 2 version pin(s) of sal-detectron2 as conflicts; "
                                "expected: phrasedet uses only its Python tree"]


def test_other_conflicts_stay_visible_and_other_lines_pass_unchanged():
    out = _report("ERROR: pip's dependency resolver does not currently take into account all the packages\n"
                  "foo 1.0 requires bar<2, but you have bar 2.1 which is incompatible.\n"
                  "Successfully installed baz-1.0\n")
    assert out.splitlines() == [
        "[bootstrap] warning: pip reports a dependency conflict: foo 1.0 requires bar<2, but you have bar 2.1 which is incompatible.",
        "Successfully installed baz-1.0",
    ]
    assert _report("") == ""
