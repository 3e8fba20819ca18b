"""tools/testing/mutation.py: the equivalent-mutant list, mutant names and diffs, the per-module score and
the scopes' files. (Running mutmut itself is `make mutation`, not a test.)"""
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from .tool_runs import tool_path

_spec = importlib.util.spec_from_file_location("mutation", tool_path("mutation.py"))
mutation = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutation)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

DOC = """# Mutation testing

- `not_read`: `a` → `b`: outside the section, ignored

## Equivalent mutants

Some prose.

### `phrasedet/text/normalize.py`

- `normalize_tokens`: `return content or words or [UNK]` → `return content or words or [UNK, None]`: reason one
- `_PunctuationTable.__missing__`:  `x =  1` → `x = 2`: reason two

## Next section

- `ignored`: `a` → `b`: not under the heading either
"""

DIFF = """--- phrasedet/text/normalize.py
+++ phrasedet/text/normalize.py
@@ -1,3 +1,3 @@
 def f(x):
-    return x >= 0.5
+    return x > 0.5
"""


def _write(tmp_path, text):
    path = tmp_path / "MUTATION.md"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_read_equivalents_takes_only_the_lines_under_its_heading_with_whitespace_collapsed(tmp_path):
    got = mutation.read_equivalents(_write(tmp_path, DOC))
    module = "phrasedet/text/normalize.py"
    assert got == {
        (module, "normalize_tokens", "return content or words or [UNK]", "return content or words or [UNK, None]"): "reason one",
        (module, "_PunctuationTable.__missing__", "x = 1", "x = 2"): "reason two",
    }


def test_a_malformed_or_duplicated_equivalent_names_the_line(tmp_path):
    bad = DOC.replace("- `normalize_tokens`: `return", "- normalize_tokens: `return")
    with pytest.raises(ValueError, match=r"MUTATION.md:11: expected"):
        mutation.read_equivalents(_write(tmp_path, bad))
    twice = DOC.replace("reason two\n", "reason two\n- `_PunctuationTable.__missing__`: `x = 1` → `x = 2`: again\n")
    with pytest.raises(ValueError, match=r"MUTATION.md:13: the same mutant is listed twice"):
        mutation.read_equivalents(_write(tmp_path, twice))
    no_module = "## Equivalent mutants\n- `f`: `a` → `b`: why\n"
    with pytest.raises(ValueError, match=r"MUTATION.md:2: "):
        mutation.read_equivalents(_write(tmp_path, no_module))


def test_a_reason_quoting_code_before_a_colon_stays_out_of_the_mutated_code(tmp_path):
    doc = ("## Equivalent mutants\n### `phrasedet/m.py`\n"
           "- `f`: `x = g(1)` → `x = g(2)`: as for `h`: both are read once\n")
    assert mutation.read_equivalents(_write(tmp_path, doc)) == {
        ("phrasedet/m.py", "f", "x = g(1)", "x = g(2)"): "as for `h`: both are read once"}


def test_the_shipped_equivalents_list_parses():
    assert isinstance(mutation.read_equivalents(), dict)


@pytest.mark.parametrize("name, function", [
    ("phrasedet.engine.comparison.claims.x_holds__mutmut_3", "holds"),
    ("phrasedet.engine.staged.init_comparison.x__cells__mutmut_11", "_cells"),
    ("phrasedet.text.normalize.xǁ_PunctuationTableǁ__missing____mutmut_2", "_PunctuationTable.__missing__"),
])
def test_function_of_a_mutant_name(name, function):
    assert mutation.function_of(name) == function


def test_changed_code_of_a_diff():
    assert mutation.changed_code(DIFF) == ("return x >= 0.5", "return x > 0.5")


def test_score_counts_caught_survived_and_equivalent_by_hand():
    module = "phrasedet/m.py"
    codes = {"phrasedet.m.x_f__mutmut_1": 1,      # killed
             "phrasedet.m.x_f__mutmut_2": 0,      # survived, listed as equivalent
             "phrasedet.m.x_f__mutmut_3": 0,      # survived
             "phrasedet.m.x_f__mutmut_4": 36,     # timeout: caught
             "phrasedet.m.x_f__mutmut_5": -11,    # segfault: caught
             "phrasedet.m.x_f__mutmut_6": 33,     # no tests: not caught
             "phrasedet.m.x_f__mutmut_7": None}   # not checked
    # no diff of the mutant never checked is asked for (each costs a `mutmut show` process)
    diffs = {2: DIFF, 3: DIFF.replace("x > 0.5", "x >= 1.5"), 6: DIFF.replace("x > 0.5", "x")}
    equivalents = {(module, "f", "return x >= 0.5", "return x > 0.5"): "why"}
    score, left = mutation.score_module(module, codes, lambda name: diffs[int(name.rsplit("_", 1)[1])], equivalents)
    assert (score.mutants, score.killed, score.survived, score.equivalent, score.not_checked) == (7, 3, 2, 1, 1)
    assert score.timed_out == 1  # one of the three kills, shown apart
    assert score.score == pytest.approx(100 * 3 / 6)  # killed / (mutants - equivalent)
    assert [(name.rsplit("_", 1)[1], status) for name, status, *_ in left] == [("3", "survived"), ("6", "no tests")]
    text = mutation.format_scores([("s", score)], 90)
    assert "50.0%" in text and "1 NOT CHECKED" in text
    assert text.splitlines()[0].split() == ["module", "mutants", "killed", "timeout", "survived", "equiv.", "score"]
    assert text.splitlines()[2].split()[:7] == ["phrasedet/m.py", "7", "3", "1", "2", "1", "50.0%"]


def test_score_of_a_module_with_every_mutant_equivalent_is_100_and_of_nothing_killed_0():
    s = mutation.ModuleScore("m", mutants=2, killed=0, survived=0, equivalent=2)
    assert s.score == 100.0
    assert mutation.ModuleScore("m", mutants=4, killed=0, survived=4).score == 0.0
    assert "BELOW 90 %" in mutation.format_scores([("s", mutation.ModuleScore("m", mutants=10, killed=8, survived=2))], 90)
    assert mutation.format_scores([("s", mutation.ModuleScore("m", mutants=10, killed=9, survived=1))], 90).endswith("ok")


def test_every_scope_names_existing_modules_and_tests():
    for name, scope in mutation.SCOPES.items():
        for path in scope.modules + scope.tests:
            assert os.path.isfile(os.path.join(ROOT, path)), f"scope {name}: {path} does not exist"
        assert all(m.startswith("phrasedet/") for m in scope.modules)


def test_no_module_is_mutated_by_two_scopes():
    modules = [m for scope in mutation.SCOPES.values() for m in scope.modules]
    assert len(modules) == len(set(modules))


def test_narrow_scopes_keeps_the_named_modules_and_drops_emptied_scopes():
    a = mutation.Scope(("phrasedet/a.py", "phrasedet/b.py"), ("tests/t.py",), deselect=("tests/t.py::x",))
    b = mutation.Scope(("phrasedet/c.py",), ("tests/u.py",))
    assert mutation.narrow_scopes({"a": a, "b": b}, ()) == {"a": a, "b": b}
    assert mutation.narrow_scopes({"a": a, "b": b}, ["phrasedet/b.py"]) == {
        "a": mutation.Scope(("phrasedet/b.py",), ("tests/t.py",), deselect=("tests/t.py::x",))}
    with pytest.raises(SystemExit) as error:
        mutation.narrow_scopes({"a": a, "b": b}, ["phrasedet/b.py", "phrasedet/z.py", "phrasedet/y.py"])
    assert str(error.value) == ("--modules: phrasedet/y.py, phrasedet/z.py is in none of the scopes a, b "
                                "(python tools/testing/mutation.py --list)")


def test_setup_cfg_lists_the_scope(tmp_path):
    scope = mutation.SCOPES["verdicts"]
    mutation.write_setup_cfg(scope, str(tmp_path))
    text = (tmp_path / "setup.cfg").read_text()
    assert text.startswith("[mutmut]\nsource_paths=phrasedet/\n")
    for path in scope.modules + scope.tests:
        assert f"\n    {path}\n" in text
    assert "\n    -p\n    no:cacheprovider\n" in text
    # what the tests read besides the code and themselves, the Makefile included (test_compare_recipes)
    assert "\nalso_copy=\n    configs\n    tools\n    results\n    pytest.ini\n    Makefile\nprocess_isolation" in text
    # a session stopped after (t + 10) * 15 s, not mutmut's (t + 1) * 15 (TIMEOUT_CONSTANT_S)
    assert text.endswith("\nprocess_isolation=forkserver\ntimeout_constant=10\n")


@pytest.mark.parametrize("remove", [False, True])
def test_a_session_removes_its_temporary_folder_when_the_mutation_tool_asks(tmp_path, remove):
    """Under mutmut no pytest session reaches the interpreter exit where pytest clears old
    sessions' folders: with REMOVE_SESSION_TMP set, each session removes its own."""
    basetemp = tmp_path / "basetemp"
    env = {k: v for k, v in os.environ.items() if k != mutation.REMOVE_SESSION_TMP}
    if remove:
        env[mutation.REMOVE_SESSION_TMP] = "1"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           f"--basetemp={basetemp}", "tests/test_paths.py::test_absolute_and_home_paths_are_kept"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert basetemp.exists() is not remove


def test_not_killed_names_every_mutant_whose_last_result_is_not_a_kill(tmp_path):
    """--retest re-runs exactly these: survivors, "no tests" and unchecked ones, never a kill."""
    (tmp_path / "mutants" / "phrasedet").mkdir(parents=True)
    codes = {"phrasedet.m.x_f__mutmut_1": 1, "phrasedet.m.x_f__mutmut_2": 0, "phrasedet.m.x_f__mutmut_3": 36,
             "phrasedet.m.x_f__mutmut_4": 33, "phrasedet.m.x_f__mutmut_5": None}
    (tmp_path / "mutants" / "phrasedet" / "m.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    assert mutation.not_killed(str(tmp_path), ["phrasedet/m.py", "phrasedet/absent.py"]) == [
        "phrasedet.m.x_f__mutmut_2", "phrasedet.m.x_f__mutmut_4", "phrasedet.m.x_f__mutmut_5"]


@pytest.mark.parametrize("name", [name for name, scope in mutation.SCOPES.items() if scope.deselect])
def test_a_deselected_test_is_passed_to_pytest_and_exists(tmp_path, name):
    scope = mutation.SCOPES[name]
    mutation.write_setup_cfg(scope, str(tmp_path))
    text = (tmp_path / "setup.cfg").read_text()
    for test in scope.deselect:
        path, name = test.split("::")
        assert path in scope.tests and f"def {name}(" in open(os.path.join(ROOT, path)).read()
        assert f"\n    --deselect\n    {test}\n" in text.split("pytest_add_cli_args=")[1]


@pytest.mark.parametrize("retest, patterns, calls", [
    (False, (), [("run", "--max-children", "2")]),
    (False, ("phrasedet.m.x_f*",), [("run", "--max-children", "2", "phrasedet.m.x_f*")]),
    # re-testing after a first pass: the survivors of that pass are named (the killed one is not)
    (True, ("phrasedet.m.x_f*",), [("run", "--max-children", "2", "phrasedet.m.x_f*"),
                                   ("run", "--max-children", "2", "phrasedet.m.x_f__mutmut_2")]),
])
def test_run_scope_passes_patterns_and_survivors_to_mutmut(tmp_path, monkeypatch, retest, patterns, calls):
    seen = []
    monkeypatch.setattr(mutation, "_mutmut", lambda workdir, *args: seen.append(args) or "")
    monkeypatch.setattr(mutation, "read_exit_codes",
                        lambda workdir, module: {"phrasedet.m.x_f__mutmut_1": 1, "phrasedet.m.x_f__mutmut_2": 0})
    scope = mutation.Scope(("phrasedet/m.py",), ("tests/test_m.py",))
    workdir, _ = mutation.run_scope("s", scope, str(tmp_path), 2, fresh=False, retest=retest, patterns=patterns)
    assert seen == calls and workdir == str(tmp_path / "s")
    assert (tmp_path / "s" / "mutmut-run.log").is_file() and (tmp_path / "s" / "setup.cfg").is_file()


@pytest.mark.parametrize("retest", [False, True])
def test_a_retest_forgets_which_tests_call_which_function_and_a_run_keeps_it(tmp_path, monkeypatch, retest):
    stats = tmp_path / "s" / "mutants" / "mutmut-stats.json"
    stats.parent.mkdir(parents=True)
    stats.write_text("{}")
    monkeypatch.setattr(mutation, "_mutmut", lambda workdir, *args: "")
    monkeypatch.setattr(mutation, "read_exit_codes", lambda workdir, module: {})
    mutation.run_scope("s", mutation.Scope(("phrasedet/m.py",), ("tests/test_m.py",)), str(tmp_path), 1,
                       fresh=False, retest=retest)
    assert stats.exists() is not retest


def test_a_module_copied_unmutated_by_a_narrowed_run_is_made_again(tmp_path, capsys):
    mutants = tmp_path / "s" / "mutants" / "phrasedet"
    mutants.mkdir(parents=True)
    (mutants / "plain.py").write_text("def f(x):\n    return x + 1\n")  # what a --modules run of another module left
    (mutants / "mutated.py").write_text("def x_f__mutmut_orig(x):\n    return x + 1\n")
    (mutants / "plain.py.meta").write_text("{}")
    scope = mutation.Scope(("phrasedet/plain.py", "phrasedet/mutated.py", "phrasedet/absent.py"), ("tests/test_m.py",))
    mutation.prepare_workdir("s", scope, str(tmp_path), fresh=False)
    assert sorted(p.name for p in mutants.iterdir()) == ["mutated.py", "plain.py.meta"]  # its results stay
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if p.is_symlink()) == sorted(
        ["phrasedet", "tests", "configs", "tools", "results", "pytest.ini", "Makefile"])
    assert os.path.samefile(tmp_path / "s" / "Makefile", os.path.join(mutation.ROOT, "Makefile"))
    assert "s: made again, mutated: phrasedet/plain.py (an earlier --modules run" in capsys.readouterr().out
    assert mutation.drop_unmutated_copies(str(tmp_path / "s"), scope.modules) == []


@pytest.mark.parametrize("returncode", [0, 1])
@pytest.mark.parametrize("out, failed", [("⠋ Running clean tests\nFailed to run clean test\n", "Failed to run clean test"),
                                         ("⠋ Running stats\nfailed to collect stats. runner returned 1\n",
                                          "failed to collect stats")])
def test_failing_tests_before_any_mutant_are_an_error_not_a_report_of_old_results(tmp_path, monkeypatch, returncode, out,
                                                                                   failed):
    monkeypatch.setattr(mutation.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, returncode, out, ""))
    with pytest.raises(RuntimeError) as error:
        mutation._mutmut(str(tmp_path), "run")
    assert str(error.value) == (f"{mutation.sys.executable} -m mutmut run (in {tmp_path}): {failed} (the scope's tests "
                                f"fail without any mutant; run them in {tmp_path / 'mutants'} to see which)\n  "
                                + out.splitlines()[1])  # what mutmut said, without its progress line
    monkeypatch.setattr(mutation.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "done", ""))
    assert mutation._mutmut(str(tmp_path), "run") == "done"


def test_results_are_recorded_and_restored_only_where_a_machine_has_none(tmp_path):
    work, record = tmp_path / "work", tmp_path / "results" / "s"
    meta = work / "mutants" / "phrasedet" / "m.py.meta"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"exit_code_by_key": {"phrasedet.m.x_f__mutmut_1": 1}}))
    mutation.save_results(str(work), str(record), ["phrasedet/m.py", "phrasedet/absent.py"])
    assert sorted(p.relative_to(record).as_posix() for p in record.rglob("*")) == ["phrasedet", "phrasedet/m.py.meta"]
    new = tmp_path / "new machine"
    assert mutation.restore_results(str(new), str(record), ["phrasedet/m.py", "phrasedet/absent.py"]) == ["phrasedet/m.py"]
    assert mutation.read_exit_codes(str(new), "phrasedet/m.py") == {"phrasedet.m.x_f__mutmut_1": 1}
    meta.write_text(json.dumps({"exit_code_by_key": {"phrasedet.m.x_f__mutmut_1": 0}}))
    assert mutation.restore_results(str(work), str(record), ["phrasedet/m.py"]) == []  # its own results stay
    assert mutation.read_exit_codes(str(work), "phrasedet/m.py") == {"phrasedet.m.x_f__mutmut_1": 0}


def test_report_runs_nothing_and_records_the_results_there_are(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mutation, "_mutmut", lambda workdir, *args: pytest.fail(f"mutmut {args} ran"))
    module = mutation.SCOPES["synthetic"].modules[0]
    meta = tmp_path / "out" / "synthetic" / "mutants" / (module + ".meta")
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"exit_code_by_key": {"phrasedet.x.x_f__mutmut_1": 1, "phrasedet.x.x_f__mutmut_2": -24}}))
    code = mutation.main(["--scopes", "synthetic", "--modules", module, "--output-root", str(tmp_path / "out"),
                          "--record-root", str(tmp_path / "rec"), "--report"])
    assert code == 0 and (tmp_path / "rec" / "synthetic" / (module + ".meta")).read_text() == meta.read_text()
    assert "2 of 2 non-equivalent mutants killed (100.0 %; 1 by the time limit)" in capsys.readouterr().out  # SIGXCPU


def test_mutmut_keeps_restored_results_of_unchanged_functions_and_retests_changed_ones(tmp_path):
    """The record round trip with mutmut itself: a new machine restores a module's results; mutmut
    keeps those of the function whose code is unchanged (a weaker test now would not kill them) and
    tests the changed function again."""
    import subprocess
    import sys

    def project(folder, g_body, strong):
        (folder / "pkg").mkdir(parents=True)
        (folder / "tests").mkdir()
        (folder / "pkg" / "__init__.py").write_text("")
        (folder / "tests" / "__init__.py").write_text("")
        (folder / "pkg" / "m.py").write_text(f"def f(x):\n    return x + 1\n\n\ndef g(x):\n    return {g_body}\n")
        checks = ("f(1) == 2", "g(3) == 6") if strong else ("f(1) is not None", "g(3) is not None")
        (folder / "tests" / "test_m.py").write_text(
            "from pkg.m import f, g\n\n\ndef test_f():\n    assert " + checks[0] + "\n\n\ndef test_g():\n    assert " + checks[1] + "\n")
        (folder / "setup.cfg").write_text("[mutmut]\nsource_paths=pkg/\ntests_dir=tests/\n")
        proc = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", "1"], cwd=folder,
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})
        assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-2000:]

    first, record, second = tmp_path / "first", tmp_path / "record", tmp_path / "second"
    project(first, "x * 2", strong=True)
    assert mutation.read_exit_codes(str(first), "pkg/m.py") == {
        "pkg.m.x_f__mutmut_1": 1, "pkg.m.x_f__mutmut_2": 1, "pkg.m.x_g__mutmut_1": 1, "pkg.m.x_g__mutmut_2": 1}
    mutation.save_results(str(first), str(record), ["pkg/m.py"])
    assert mutation.restore_results(str(second), str(record), ["pkg/m.py"]) == ["pkg/m.py"]
    project(second, "x * 3", strong=False)  # g changed; the tests got weaker
    codes = mutation.read_exit_codes(str(second), "pkg/m.py")
    assert [codes[f"pkg.m.x_f__mutmut_{k}"] for k in (1, 2)] == [1, 1]  # kept: f is unchanged
    assert [codes[f"pkg.m.x_g__mutmut_{k}"] for k in (1, 2)] == [0, 0]  # tested again, against the weak test


def test_report_refuses_a_module_whose_survivors_have_no_mutated_copy_to_diff(tmp_path, monkeypatch):
    monkeypatch.setattr(mutation, "_mutmut", lambda workdir, *args: pytest.fail(f"mutmut {args} ran"))
    first, second = mutation.SCOPES["synthetic"].modules[:2]
    mutants = tmp_path / "out" / "synthetic" / "mutants"
    for module, codes in ((first, {"phrasedet.x.x_f__mutmut_1": 0}), (second, {"phrasedet.y.x_g__mutmut_1": 1})):
        (mutants / module).parent.mkdir(parents=True, exist_ok=True)
        (mutants / (module + ".meta")).write_text(json.dumps({"exit_code_by_key": codes}))
        (mutants / module).write_text("def f(x):\n    return x\n")  # what a --modules run of another module left
    with pytest.raises(SystemExit) as error:
        mutation.main(["--scopes", "synthetic", "--modules", first, second, "--output-root", str(tmp_path / "out"), "--report"])
    assert str(error.value) == (f"--report: no mutated copy of {first} in {mutants} (an earlier --modules run copied them "
                                "unmutated): run the scope without --report first; it makes them again and re-tests only "
                                "mutants without a result")
