"""phrasedet/engine/comparison/tool_process.py: a tool run in a child of the fork server behaves as
``python tool.py args`` started afresh would: its arguments, working directory, environment,
thread count, output and exit status are the caller's and the tool's, not the server's."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from phrasedet.engine.comparison.tool_process import ROOT, run_python, tool_path

SCRIPT = textwrap.dedent("""
    import json, multiprocessing, os, sys
    import torch
    print("out", flush=True)
    print("err", file=sys.stderr, flush=True)
    os.write(1, b"fd\\n")  # as C++ code or a subprocess writes
    json.dump({"argv": sys.argv, "cwd": os.getcwd(), "env": os.environ.get("TOOL_PROCESS_TEST"),
               "threads": torch.get_num_threads(), "name": __name__, "file": __file__,
               "root_first": sys.path[:2], "start_method": multiprocessing.get_start_method()},
              open(sys.argv[1], "w"))
    action = sys.argv[2]
    if action == "exit":
        sys.exit(3)
    if action == "raise":
        raise ValueError("the tool failed here")
    if action == "kill":
        os.kill(os.getpid(), 9)
    if action == "sleep":
        import time
        time.sleep(60)
""")


#: A fresh process's default start method for the processes it starts (Linux: "fork"); this test process's
#: own may have been set by others, so it is asked of a fresh interpreter
FRESH_START_METHOD = subprocess.run([sys.executable, "-c", "import multiprocessing; print(multiprocessing.get_start_method())"],
                                    capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "tool.py"
    path.write_text(SCRIPT)
    return str(path)


def _run(script, tmp_path, action, **kwargs):
    output = tmp_path / "output.txt"
    status = run_python(script, [tmp_path / "seen.json", action], str(output), **kwargs)
    seen = json.loads((tmp_path / "seen.json").read_text()) if (tmp_path / "seen.json").exists() else None
    return status, output.read_text(), seen


def test_a_child_gets_the_callers_arguments_directory_environment_and_threads(script, tmp_path, monkeypatch):
    _run(script, tmp_path, "none")  # the server starts (or is running): what follows changes after it started
    monkeypatch.setenv("TOOL_PROCESS_TEST", "set after the server started")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.chdir(tmp_path)
    status, output, seen = _run(script, tmp_path, "none")
    assert status == 0 and output == "out\nerr\nfd\n" * 2  # appended to the end of the file, in the order written
    assert seen == {"argv": [script, str(tmp_path / "seen.json"), "none"], "cwd": str(tmp_path),
                    "env": "set after the server started", "threads": 1, "name": "__main__", "file": script,
                    "root_first": [str(tmp_path), ROOT], "start_method": FRESH_START_METHOD}
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert _run(script, tmp_path, "none", env={**os.environ, "TOOL_PROCESS_TEST": "given"})[2]["threads"] == 2
    assert json.loads((tmp_path / "seen.json").read_text())["env"] == "given"


def test_exit_status_is_the_tools(script, tmp_path):
    assert _run(script, tmp_path, "exit")[0] == 3
    status, output, _ = _run(script, tmp_path, "raise")
    assert status == 1 and "Traceback" in output and "ValueError: the tool failed here" in output
    assert _run(script, tmp_path, "kill")[0] == -signal.SIGKILL


def test_a_child_past_its_timeout_is_killed(script, tmp_path):
    with pytest.raises(TimeoutError, match="ran past 3 s: killed"):
        _run(script, tmp_path, "sleep", timeout=3)


def test_a_tool_is_found_by_its_file_name_in_its_folder():
    assert ROOT == os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))  # the repository
    assert tool_path("train_net.py") == os.path.join(ROOT, "tools", "train_net.py")
    assert tool_path("compare_recipes.py") == os.path.join(ROOT, "tools", "compare", "compare_recipes.py")
    assert tool_path("setup/bootstrap.sh") == os.path.join(ROOT, "tools", "setup", "bootstrap.sh")
    names = [n for _, _, files in os.walk(os.path.join(ROOT, "tools")) for n in files if n.endswith(".py")]
    assert len(names) == len(set(names)) > 20  # every tool's name is unique, so the name alone finds it
    with pytest.raises(FileNotFoundError, match=r"no single tool 'compare_recipe.py' under .*tools: none"):
        tool_path("compare_recipe.py")
