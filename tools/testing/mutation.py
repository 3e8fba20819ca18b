#!/usr/bin/env python
"""Mutation testing of the modules where a silent bug would corrupt a published number (issue 14).

    make mutation                                  # = python tools/testing/mutation.py (after make test's set-up)
    python tools/testing/mutation.py --scopes text cca     # some scopes only
    python tools/testing/mutation.py --list                # the scopes, their modules and their tests
    python tools/testing/mutation.py --survivors           # also print every surviving mutant's diff
    python tools/testing/mutation.py --scopes text --retest   # after adding tests: re-test the survivors
    python tools/testing/mutation.py --scopes cca --mutants 'phrasedet.modeling.cca.linear.x_fit_cca*'   # some mutants only
    python tools/testing/mutation.py --scopes phrase_detection_eval --modules phrasedet/evaluation/phrase_detection/detections.py
    python tools/testing/mutation.py --record-root results/mutation        # across machines: start from the recorded results
    python tools/testing/mutation.py --scopes checkpoint --record-root results/mutation --report   # record a stopped run

Each scope (``SCOPES``) pairs the modules it mutates with the test files that are meant to catch
their bugs; mutmut (https://mutmut.readthedocs.io, version 3) mutates one expression at a time and
runs, for each mutant, only those of the scope's tests that call the mutated function. A scope runs
in its own folder ``output/mutation/<scope>/`` (a generated ``setup.cfg``, links to ``phrasedet/``
and ``tests/``, and mutmut's ``mutants/``), so a second run re-tests only the functions that changed.
``output/`` does not outlive a machine: with ``--record-root`` each module's results (mutmut's
``.meta`` file: every mutant's exit code, every function's hash) are copied to
``<record-root>/<scope>/`` after the run (or by ``--report``, e.g. after a run was stopped) and
restored on a machine that has none, where mutmut keeps the results of unchanged functions.

Printed per module: mutants, killed (a test failed, crashed or timed out), survived, those of the
survivors listed as equivalent in ``docs/MUTATION.md`` (a mutant that no test can kill because the
behaviour is the same, with the reason), and the score

    killed / (mutants - equivalent)

against the target (``--target``, 90 %). Exits non-zero when a module is below the target or a
mutant was not checked. Lines that only log are not mutated (``DO_NOT_MUTATE``): a changed log
message corrupts no number. docs/MUTATION.md says more.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace

from mutmut.stats import status_by_exit_code

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EQUIVALENTS_DOC = os.path.join(ROOT, "docs", "MUTATION.md")


@dataclass(frozen=True)
class Scope:
    """``modules``: source files mutated (relative to the repository root); ``tests``: the test
    files run against their mutants; ``deselect``: test ids of those files left out, end-to-end
    runs that call nearly every mutated function and would make each mutant cost tens of seconds
    (the unit tests of the same files pin the behaviour they check)."""

    modules: tuple
    tests: tuple
    deselect: tuple = ()


def _files(folder, names):
    return tuple(f"{folder}/{name}" for name in names)


SCOPES = {
    "phrase_detection_eval": Scope(
        _files("phrasedet/evaluation/phrase_detection",
               ["box_iou.py", "phrase_detection_ap.py", "ground_truth.py", "detections.py", "ppa_ground_truth.py",
                "phrase_filter.py", "report.py"]),
        _files("tests/evaluation",
               ["test_phrase_detection_ap.py", "test_summary_and_localization.py", "test_boundaries_phrase_detection.py",
                "test_ppa_evaluation.py", "test_phrase_filter.py", "test_evaluator.py", "test_predictions_file.py"]),
        # each trains a detector or runs tools/ on the built-in dataset (15-140 s on 2 cores)
        deselect=("tests/evaluation/test_predictions_file.py::test_command_agrees_with_in_loop_evaluator_jsonl_and_json",
                  "tests/evaluation/test_predictions_file.py::test_tool_prints_table_and_writes_results",
                  "tests/evaluation/test_phrase_filter.py::test_large_vocabulary_is_filtered_image_by_image")),
    "retrieval_eval": Scope(
        _files("phrasedet/evaluation/retrieval", ["metrics.py", "ranks.py", "protocols.py", "scorers.py"]),
        _files("tests/evaluation",
               ["test_retrieval_metrics.py", "test_retrieval_ranks.py", "test_retrieval_evaluator.py",
                "test_boundaries_retrieval.py"])),
    "pointing_eval": Scope(
        _files("phrasedet/evaluation/pointing", ["hit_rules.py", "pointing_game.py", "centre.py", "heatmaps.py", "metrics.py"]),
        _files("tests/evaluation",
               ["test_pointing_hit_rules.py", "test_pointing_evaluator.py", "test_boundaries_pointing.py",
                "test_pointing_tool.py"])),
    "readers": Scope(
        _files("phrasedet/data/datasets", ["flickr30k_entities.py", "referit.py", "visual_genome.py"]),
        _files("tests/data",
               ["test_flickr30k_entities.py", "test_referit.py", "test_visual_genome.py", "test_boundaries_readers.py",
                "test_reader_messages.py"])),
    "caption_readers": Scope(
        _files("phrasedet/data/datasets", ["coco_captions.py", "flickr30k_captions.py", "karpathy.py", "vsepp_precomp.py"])
        + ("phrasedet/data/image_features.py",),
        _files("tests/data",
               ["test_caption_datasets.py", "test_boundaries_readers.py", "test_reader_messages.py",
                "test_fuzz_caption_readers.py", "test_fuzz_image_features.py", "test_real_file_damage.py"]),
        # a fresh interpreter that imports everything; the built-in dataset written and read in full
        deselect=("tests/data/test_caption_datasets.py::test_registration_reads_no_file",
                  "tests/data/test_caption_datasets.py::test_builtin_captions_equal_the_entities_loader")),
    "text": Scope(
        _files("phrasedet/text", ["normalize.py", "tokenize.py", "vocab.py", "word_vocab.py"])
        + ("phrasedet/data/statistics.py",),
        tuple(f"tests/text/{name}" for name in sorted(os.listdir(os.path.join(ROOT, "tests", "text"))) if name.startswith("test_"))
        + ("tests/data/test_statistics.py",)),
    "cca": Scope(
        _files("phrasedet/modeling/cca", ["linear.py", "layers.py", "fitting.py", "deep.py"]),
        _files("tests/modeling", ["test_cca.py", "test_cca_layers.py", "test_cca_fitting.py", "test_deep_cca.py",
                                  "test_boundaries_cca_losses.py"])),
    "losses": Scope(
        _files("phrasedet/modeling/losses", ["ranking.py", "instance.py", "logistic.py", "gather.py"]),
        _files("tests/modeling",
               ["test_retrieval_losses.py", "test_instance_loss.py", "test_retrieval_gather.py", "test_boundaries_cca_losses.py"])),
    "samplers": Scope(
        ("phrasedet/modeling/roi_heads/phrase_sampling.py", "phrasedet/data/phrase_sampling.py",
         "phrasedet/modeling/roi_heads/negative_phrases.py"),
        ("tests/modeling/test_phrase_roi_heads.py", "tests/modeling/test_negative_phrases.py",
         "tests/data/test_phrase_sampling.py", "tests/modeling/test_boundaries_sampling.py"),
        # 20 s: five training iterations with NPA, killed, resumed and repeated
        deselect=("tests/modeling/test_negative_phrases.py::"
                  "test_training_with_npa_refreshes_the_table_resumes_and_repeats_exactly",)),
    "checkpoint": Scope(
        _files("phrasedet/modeling/checkpoint",
               ["backbone_weights.py", "detection_checkpoint.py", "files.py", "load_report.py", "names.py"]),
        _files("tests/modeling", ["test_checkpoint_loading.py", "test_fuzz_checkpoint_file.py"])),
    "evaluator_inputs": Scope(
        ("phrasedet/evaluation/output_checks.py", "phrasedet/evaluation/array_files.py",
         "phrasedet/evaluation/retrieval/evaluator.py", "phrasedet/evaluation/retrieval/files.py",
         "phrasedet/evaluation/pointing/outputs.py", "phrasedet/evaluation/pointing/files.py"),
        _files("tests/evaluation",
               ["test_retrieval_evaluator.py", "test_pointing_evaluator.py", "test_fuzz_saved_files.py",
                "test_retrieval_tool.py", "test_pointing_tool.py", "test_summary_and_localization.py"])),
    "synthetic": Scope(
        ("phrasedet/paths.py", "phrasedet/data/synthetic/facts.py", "phrasedet/data/synthetic/specificity.py"),
        ("tests/test_paths.py", "tests/data/test_caption_facts.py"),
        # the default dataset's 810 images counted twice (16 s); the same agreement on vague captions stays
        deselect=("tests/data/test_caption_facts.py::"
                  "test_the_measure_agrees_with_an_independent_count_on_the_default_dataset",)),
    "verdicts": Scope(
        ("phrasedet/engine/staged/init_comparison.py",
         *_files("phrasedet/engine/comparison", ["claims.py", "retrieval_claims.py", "pointing_claims.py",
                                                 "phrase_detection_claims.py"])),
        ("tests/test_init_comparison.py", "tests/test_retrieval_claims.py", "tests/test_pointing_claims.py",
         "tests/test_phrase_detection_claims.py", "tests/test_boundaries_claims.py",
         "tests/test_boundaries_init_comparison.py")),
    # issue 44: the instrument that judges every claim (the built-in world, selection and curves, the
    # comparison protocol, the probes and the filter's selectivity figure)
    "instrument_data": Scope(
        _files("phrasedet/data/synthetic", ["oracle.py", "labels.py", "pretraining.py", "captions.py", "language.py"]),
        _files("tests/data", ["test_labels_and_oracle.py", "test_pretraining_split.py", "test_synthetic.py",
                              "test_language.py", "test_caption_facts.py", "test_captions.py"]),
        deselect=("tests/data/test_caption_facts.py::"
                  "test_the_measure_agrees_with_an_independent_count_on_the_default_dataset",)),
    "instrument_training": Scope(
        ("phrasedet/engine/model_selection.py", "phrasedet/engine/staged/selected_training.py",
         "phrasedet/utils/learning_curves.py", "phrasedet/engine/pretrained_cnn.py", "phrasedet/engine/pretrained_models.py",
         "phrasedet/modeling/meta_arch/image_classifier.py", "phrasedet/modeling/backbone/builtin_resnet.py"),
        ("tests/test_model_selection.py", "tests/test_selected_training.py", "tests/test_learning_curves.py",
         "tests/test_builtin_weights.py", "tests/modeling/test_pretraining.py", "tests/test_builtin_detector.py")),
    "instrument_comparison": Scope(
        (*_files("phrasedet/engine/comparison", ["protocol.py", "run_records.py", "runs.py", "worlds.py", "unseen_words.py",
                                                 "cold_start.py"]),
         "phrasedet/text/build.py"),
        ("tests/test_run_records.py", "tests/test_runs.py", "tests/test_comparison_oracle_features.py",
         "tests/test_comparison_worlds.py", "tests/test_comparison_word_vectors.py", "tests/test_learning_curves.py",
         "tests/test_compare_recipes.py", "tests/text/test_text_build.py", "tests/test_unseen_words.py", "tests/test_cold_start.py")),
    "instrument_probes": Scope(
        ("phrasedet/evaluation/representation_probe.py", "phrasedet/evaluation/region_probe.py",
         "phrasedet/evaluation/word_vector_probe.py", "phrasedet/evaluation/retrieval/instance_fit.py",
         "phrasedet/engine/phrase_filtering.py"),
        ("tests/evaluation/test_representation_probe.py", "tests/evaluation/test_region_probe.py",
         "tests/evaluation/test_word_vector_probe.py", "tests/evaluation/test_instance_fit.py", "tests/test_phrase_filtering.py"),
        # a detector trained and probed by the tool (130 s); GloVe loaded by the tool (24 s)
        deselect=("tests/evaluation/test_region_probe.py::test_the_tool_probes_a_detector_and_names_a_checkpoint_that_does_not_fit",
                  "tests/evaluation/test_word_vector_probe.py::test_the_tool_probes_the_long_tailed_sizes_with_glove")),
}

# Statements that only log: never mutated (mutmut's do_not_mutate_patterns, matched per line).
DO_NOT_MUTATE = [r"^\s*logger\.(debug|info|warning|error|exception)\(", r"^\s*log_every_n"]
CAUGHT = {"killed", "timeout", "segfault"}
# Every mutant is a pytest session of its own in a process that mutmut forks and that leaves by
# os._exit: pytest removes old sessions' temporary folders only at interpreter exit (atexit), so
# with the checkpoint tests' 0.9 GB of weight files per session a scope filled a 250 GB disk in two
# hours (pytest's tmp_path_retention_policy=none is applied at that same exit, and did not help).
# With this variable set, tests/conftest.py removes each session's folder when the session ends.
REMOVE_SESSION_TMP = "PHRASEDET_REMOVE_SESSION_TMP"
# mutmut stops a mutant's test session after (t + c) * 15 s of wall-clock time (t: the time its
# tests took in mutmut's first pass), and reads the stop as a kill ("timeout"). With mutmut's
# c = 1 s, a session of 0.03 s of tests had 15 s, less than a forked pytest session takes to
# collect the scope's test files on cores shared with training jobs: on 2026-11-27, 80 of the first
# 175 mutants of `evaluator_inputs` "timed out", every mutant of some functions, string edits
# included. With c = 10 s a session has at least 150 s (and 300 CPU seconds); a mutant that
# really loops costs that much, once. Timeouts are counted apart in the table (``timeout``).
TIMEOUT_CONSTANT_S = 10


def status_of(exit_code):
    """mutmut's own reading of a mutant's exit code ("killed", "survived", "timeout", ...)."""
    return status_by_exit_code[exit_code]


# ---------------------------------------------------------------- the equivalent-mutant list

_EQUIVALENT = re.compile(r"^- `(?P<function>[^`]+)`:\s+`(?P<before>.+)`\s+→\s+`(?P<after>.+?)`:\s+(?P<reason>\S.*)$")  # the reason may quote code
_MODULE_HEADING = re.compile(r"^### `(?P<module>phrasedet/\S+\.py)`\s*$")


def read_equivalents(path=EQUIVALENTS_DOC):
    """The equivalent mutants listed in ``path`` (docs/MUTATION.md), under its heading
    "## Equivalent mutants": one ``### `module``` heading per module, then one line per mutant::

        - `function`: `original code` → `mutated code`: reason

    Returns {(module, function, original, mutated): reason}, code with whitespace collapsed.
    A malformed line under that heading is an error naming ``path:line``."""
    equivalents, module, inside = {}, None, False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if line.startswith("## "):
                inside = line.strip() == "## Equivalent mutants"
                continue
            if not inside or not line.strip():
                continue
            heading = _MODULE_HEADING.match(line)
            if heading:
                module = heading["module"]
                continue
            if not line.startswith("- "):
                continue
            m = _EQUIVALENT.match(line)
            if m is None or module is None:
                raise ValueError(f"{path}:{number}: expected '- `function`: `original` → `mutated`: reason' under a "
                                 f"'### `phrasedet/....py`' heading, got {line!r}")
            key = (module, m["function"], _squash(m["before"]), _squash(m["after"]))
            if key in equivalents:
                raise ValueError(f"{path}:{number}: the same mutant is listed twice")
            equivalents[key] = m["reason"]
    return equivalents


def _squash(code):
    return " ".join(code.split())


def function_of(mutant_name):
    """``phrasedet.x.y.xǁClassǁmethod__mutmut_3`` -> ``Class.method``; ``...x_func__mutmut_1`` -> ``func``."""
    last = mutant_name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[-1]
    if last.startswith("xǁ"):
        return ".".join(last[2:].split("ǁ"))
    return last[2:] if last.startswith("x_") else last


def changed_code(diff):
    """(original, mutated) lines of a unified diff, each side joined with whitespace collapsed."""
    lines = diff.splitlines()
    before = [line[1:] for line in lines if line.startswith("-") and not line.startswith("---")]
    after = [line[1:] for line in lines if line.startswith("+") and not line.startswith("+++")]
    return _squash(" ".join(before)), _squash(" ".join(after))


# ---------------------------------------------------------------- scores

@dataclass
class ModuleScore:
    module: str
    mutants: int = 0
    killed: int = 0
    survived: int = 0
    equivalent: int = 0
    not_checked: int = 0
    timed_out: int = 0  # of ``killed``: stopped by mutmut's time limit, not by a failing test

    @property
    def score(self):
        """killed / (mutants - equivalent), in % (100 when nothing is left to kill)."""
        pool = self.mutants - self.equivalent
        return 100.0 if pool == 0 else 100.0 * self.killed / pool


def score_module(module, exit_code_by_mutant, diff_of, equivalents):
    """Score one module from mutmut's exit codes; ``diff_of(name)`` gives a survivor's diff.
    Returns (ModuleScore, [(name, status, function, original, mutated) of every survivor that is
    not listed as equivalent])."""
    score, survivors = ModuleScore(module), []
    for name, code in sorted(exit_code_by_mutant.items()):
        status = status_of(code)
        score.mutants += 1
        if status in CAUGHT:
            score.killed += 1
            score.timed_out += status == "timeout"
            continue
        if status == "not checked":  # never run (e.g. outside --mutants): nothing to compare with the list
            score.not_checked += 1
            continue
        function = function_of(name)
        before, after = changed_code(diff_of(name))
        if (module, function, before, after) in equivalents:
            score.equivalent += 1
        else:
            score.survived += 1
            survivors.append((name, status, function, before, after))
    return score, survivors


def format_scores(rows, target):
    head = f"{'module':<58} {'mutants':>7} {'killed':>6} {'timeout':>7} {'survived':>8} {'equiv.':>6} {'score':>7}"
    lines = [head, "-" * len(head)]
    for scope, s in rows:
        verdict = "ok" if s.score >= target and not s.not_checked else f"BELOW {target:g} %"
        if s.not_checked:
            verdict = f"{s.not_checked} NOT CHECKED"
        lines.append(f"{s.module:<58} {s.mutants:>7} {s.killed:>6} {s.timed_out:>7} {s.survived:>8} {s.equivalent:>6} {s.score:>6.1f}%  {verdict}")
    return "\n".join(lines)


# ---------------------------------------------------------------- running mutmut

#: What a scope's folder holds beside ``phrasedet`` and ``tests`` (links), and what mutmut copies
#: into its ``mutants/`` folder, where the tests run: results/, the records some tests read; the
#: Makefile, which test_compare_recipes reads (``make -n demo``).
COPIED = ("configs", "tools", "results", "pytest.ini", "Makefile")


def write_setup_cfg(scope, workdir):
    """mutmut's configuration for one scope (mutmut reads ./setup.cfg)."""
    def block(values):
        return "".join(f"\n    {v}" for v in values)

    deselect = [arg for test in scope.deselect for arg in ("--deselect", test)]

    text = ("[mutmut]\n"
            "source_paths=phrasedet/\n"
            f"only_mutate={block(scope.modules)}\n"
            f"pytest_add_cli_args_test_selection={block(scope.tests)}\n"
            f"pytest_add_cli_args={block(['-p', 'no:cacheprovider', '-x', '-q', *deselect])}\n"
            f"do_not_mutate_patterns={block(DO_NOT_MUTATE)}\n"
            f"also_copy={block(COPIED)}\n"
            "process_isolation=forkserver\n"
            f"timeout_constant={TIMEOUT_CONSTANT_S}\n")
    with open(os.path.join(workdir, "setup.cfg"), "w") as f:
        f.write(text)


def prepare_workdir(name, scope, root, fresh):
    workdir = os.path.join(root, name)
    if fresh and os.path.isdir(workdir):
        shutil.rmtree(workdir)
    os.makedirs(workdir, exist_ok=True)
    for entry in ("phrasedet", "tests", *COPIED):
        link = os.path.join(workdir, entry)
        if not os.path.lexists(link):
            os.symlink(os.path.join(ROOT, entry), link)
    write_setup_cfg(scope, workdir)
    drop_unmutated_copies(workdir, scope.modules)
    return workdir


def check_mutated_copies(workdir, modules):
    """Refuse to report (``SystemExit``, naming them) on modules with survivors but no mutated copy
    in ``workdir/mutants/``: their survivors' diffs, which decide which are listed as equivalent,
    exist only there. An earlier ``--modules`` run leaves the scope's other modules so; a run makes
    them again (and re-tests nothing that has a result)."""
    def needs_diffs(module):  # a survivor, or a "no tests": compared with the equivalent list by its diff
        return any(status_of(c) not in CAUGHT | {"not checked"} for c in read_exit_codes(workdir, module).values())

    missing = [m for m in modules if needs_diffs(m) and not os.path.isfile(os.path.join(workdir, "mutants", m))]
    if missing:
        raise SystemExit(f"--report: no mutated copy of {', '.join(missing)} in {os.path.join(workdir, 'mutants')} (an "
                         "earlier --modules run copied them unmutated): run the scope without --report first; it makes "
                         "them again and re-tests only mutants without a result")


def drop_unmutated_copies(workdir, modules):
    """Delete each of ``modules``' copies in ``workdir/mutants/`` that holds no mutant. A run narrowed
    by ``--modules`` copies the scope's other modules there unmutated, and mutmut makes a module's
    mutants only when its copy is older than the source: a later run of the whole scope would
    leave those modules unmutated, every mutant "no tests". Returns the modules dropped."""
    dropped = []
    for module in modules:
        path = os.path.join(workdir, "mutants", module)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                if "__mutmut_" in f.read():
                    continue
            os.remove(path)
            dropped.append(module)
    if dropped:
        print(f"[mutation] {os.path.basename(workdir)}: made again, mutated: {', '.join(dropped)} "
              "(an earlier --modules run had copied them unmutated)", flush=True)
    return dropped


def _mutmut(workdir, *args):
    """Run ``mutmut *args`` in ``workdir``; returns its output. One thread per test process: the
    mutants run ``--jobs`` at a time; each test session removes its temporary folder when it ends
    (``REMOVE_SESSION_TMP``)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": "", REMOVE_SESSION_TMP: "1"}
    cmd = [sys.executable, "-m", "mutmut", *args]
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    if proc.returncode not in (0, 1) or "Traceback" in proc.stderr:
        raise RuntimeError(f"{' '.join(cmd)} (in {workdir}) exited with {proc.returncode}:\n"
                           f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    failed = [m for m in TESTS_FAILED if m in proc.stdout]
    if failed:  # mutmut then tests no mutant and exits 1: the results would be the old ones, or none
        raise RuntimeError(f"{' '.join(cmd)} (in {workdir}): {failed[0]} (the scope's tests fail without any "
                           f"mutant; run them in {os.path.join(workdir, 'mutants')} to see which)"
                           + "".join(f"\n  {line}" for line in _last_lines(proc.stdout + proc.stderr)))
    return proc.stdout


def _last_lines(output, count=20):
    """The last ``count`` lines of mutmut's ``output`` that are not its progress spinner (which
    rewrites one line per mutant): what it says about a failure."""
    lines = [line.rstrip() for line in output.replace("\r", "\n").splitlines()]
    return [line for line in lines if line.strip() and line.lstrip()[:1] not in SPINNER][-count:]


#: The first characters of mutmut's progress lines.
SPINNER = set("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")


#: What mutmut prints when the scope's tests fail on the unmutated code: in its first pass, which
#: records the functions each test calls ("stats"), or in the clean run after it.
TESTS_FAILED = ("failed to collect stats", "Failed to run clean test")


def read_exit_codes(workdir, module):
    """mutmut's recorded exit code per mutant of ``module`` ({} when it has no mutant)."""
    meta = os.path.join(workdir, "mutants", module + ".meta")
    if not os.path.isfile(meta):
        return {}
    with open(meta) as f:
        return json.load(f)["exit_code_by_key"]


def not_killed(workdir, modules):
    """Names of the mutants of ``modules`` whose last result is not a kill (survived, no tests,
    not checked, ...)."""
    return sorted(name for module in modules for name, code in read_exit_codes(workdir, module).items()
                  if status_of(code) not in CAUGHT)


def forget_test_calls(workdir):
    """Delete mutmut's record of which tests call which function (``mutants/mutmut-stats.json``),
    so that its next run records it again for every test."""
    stats = os.path.join(workdir, "mutants", "mutmut-stats.json")
    if os.path.isfile(stats):
        os.remove(stats)


def restore_results(workdir, record, modules):
    """Copy each module's recorded mutmut results (``<record>/<module>.meta``) into ``workdir``
    where it has none (a new machine): mutmut then keeps the results of every function whose code
    is unchanged and tests the others. Returns the modules restored."""
    restored = []
    for module in modules:
        src, dst = os.path.join(record, module + ".meta"), os.path.join(workdir, "mutants", module + ".meta")
        if os.path.isfile(src) and not os.path.isfile(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
            restored.append(module)
    return restored


def save_results(workdir, record, modules):
    """Copy each module's mutmut results (``mutants/<module>.meta``: the exit code of every mutant and
    the hash of every function) to ``<record>/<module>.meta``, the repository's record."""
    for module in modules:
        src = os.path.join(workdir, "mutants", module + ".meta")
        if os.path.isfile(src):
            dst = os.path.join(record, module + ".meta")
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)


def run_scope(name, scope, root, jobs, fresh, retest=False, patterns=()):
    """Run mutmut on one scope; with ``retest``, then re-test every mutant not killed so far.

    mutmut keeps a mutant's result until its function changes, so a survivor stays a survivor
    after a test that kills it is added; naming it on the command line makes mutmut re-test it
    (every test is first matched again to the functions it calls). ``patterns`` (fnmatch, e.g.
    ``phrasedet.modeling.cca.linear.x_fit_cca*``) test only the matching mutants; the others keep their
    earlier result, or stay "not checked"."""
    workdir = prepare_workdir(name, scope, root, fresh)
    start = time.perf_counter()
    if retest:  # mutmut records which functions a test calls only for tests it has not seen: an
        # existing test that now calls a renamed or new function would never be run against its mutants
        forget_test_calls(workdir)
    out = _mutmut(workdir, "run", "--max-children", str(jobs), *patterns)
    left = not_killed(workdir, scope.modules) if retest else []
    if left:
        out += _mutmut(workdir, "run", "--max-children", str(jobs), *left)
    with open(os.path.join(workdir, "mutmut-run.log"), "w") as f:
        f.write(out)
    return workdir, time.perf_counter() - start


def narrow_scopes(scopes, modules):
    """``scopes`` ({name: Scope}) with only ``modules`` left in each (all when ``modules`` is empty);
    scopes left with none are dropped. A module of none of them is an error naming it."""
    if not modules:
        return scopes
    unknown = sorted(set(modules) - {m for scope in scopes.values() for m in scope.modules})
    if unknown:
        raise SystemExit(f"--modules: {', '.join(unknown)} is in none of the scopes {', '.join(scopes)} "
                         "(python tools/testing/mutation.py --list)")
    narrowed = {name: replace(scope, modules=tuple(m for m in scope.modules if m in modules))
                for name, scope in scopes.items()}
    return {name: scope for name, scope in narrowed.items() if scope.modules}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scopes", nargs="+", choices=sorted(SCOPES), default=list(SCOPES))
    p.add_argument("--output-root", default=os.path.join(ROOT, "output", "mutation"))
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="mutants tested at once")
    p.add_argument("--target", type=float, default=90.0, help="minimum score per module, in %% (default 90)")
    p.add_argument("--fresh", action="store_true", help="forget earlier results of these scopes")
    p.add_argument("--survivors", action="store_true", help="print the diff of every survivor not listed as equivalent")
    p.add_argument("--retest", action="store_true",
                   help="re-test the mutants not killed in an earlier run (after adding tests)")
    p.add_argument("--mutants", nargs="+", default=(), metavar="PATTERN",
                   help="test only the mutants matching these fnmatch patterns (e.g. after changing one function: "
                        "'phrasedet.modeling.cca.linear.x_fit_cca*'); the others keep their earlier result")
    p.add_argument("--modules", nargs="+", default=(), metavar="PATH",
                   help="mutate and score only these modules of the chosen scopes (e.g. "
                        "phrasedet/evaluation/phrase_detection/detections.py)")
    p.add_argument("--record-root", default="", metavar="DIR",
                   help="keep each scope's results in DIR/<scope> and start from them on a new machine "
                        "(the project's: results/mutation)")
    p.add_argument("--report", action="store_true",
                   help="run nothing: score the results there are (and record them with --record-root)")
    p.add_argument("--list", action="store_true", help="print the scopes and exit")
    args = p.parse_args(argv)
    if args.list:
        for name, scope in SCOPES.items():
            print(f"{name}:\n  mutates " + "\n          ".join(scope.modules) + "\n  tests   " + "\n          ".join(scope.tests))
        return 0
    scopes = narrow_scopes({name: SCOPES[name] for name in args.scopes}, args.modules)
    equivalents = read_equivalents()
    rows, survivors, failed = [], [], False
    diffs = {}  # (workdir, mutant) -> `mutmut show`: one subprocess per survivor, reused by --survivors

    def diff_of(workdir, mutant):
        if (workdir, mutant) not in diffs:
            diffs[workdir, mutant] = _mutmut(workdir, "show", mutant)
        return diffs[workdir, mutant]

    for name, scope in scopes.items():
        record = os.path.join(args.record_root, name) if args.record_root else ""
        if record and not args.fresh:
            restored = restore_results(prepare_workdir(name, scope, args.output_root, False), record, scope.modules)
            if restored:
                print(f"[mutation] scope {name}: results of {len(restored)} module(s) restored from {record}")
        if args.report:
            workdir = prepare_workdir(name, scope, args.output_root, False)
            check_mutated_copies(workdir, scope.modules)
        else:
            workdir, seconds = run_scope(name, scope, args.output_root, args.jobs, args.fresh, args.retest,
                                        args.mutants)
            print(f"[mutation] scope {name}: {seconds / 60:.1f} min")
        if record:
            save_results(workdir, record, scope.modules)
        for module in scope.modules:
            score, left = score_module(module, read_exit_codes(workdir, module),
                                       lambda mutant: diff_of(workdir, mutant), equivalents)
            rows.append((name, score))
            survivors += [(workdir, module, *s) for s in left]
            failed |= score.score < args.target or bool(score.not_checked)
    print(format_scores(rows, args.target))
    total = ModuleScore("all scoped modules", *(sum(getattr(s, k) for _, s in rows)
                                                for k in ("mutants", "killed", "survived", "equivalent", "not_checked",
                                                          "timed_out")))
    print(f"{total.module}: {total.killed} of {total.mutants - total.equivalent} non-equivalent mutants killed "
          f"({total.score:.1f} %; {total.timed_out} by the time limit), {total.equivalent} listed as equivalent in "
          "docs/MUTATION.md")
    for workdir, module, mutant, status, function, before, after in survivors:
        print(f"  {status}: {mutant}  ({module}, {function})")
        if args.survivors:
            print("    " + diff_of(workdir, mutant).replace("\n", "\n    "))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
