"""Tests run the repository's tools as the comparisons do: ``python tools/<tool> args`` in a
child of the fork server of :mod:`phrasedet.engine.comparison.tool_process` (about 10 s of imports saved on
each run). ``tests/test_tool_process.py`` checks that such a child behaves as a fresh process, and
a few tests still start ``python tools/...`` as a subprocess (the ``make demo`` test among them)."""
import os
import tempfile
from typing import NamedTuple

from phrasedet.engine.comparison.tool_process import ROOT, run_python, tool_path

__all__ = ["ROOT", "ToolRun", "load_tool", "run_tool", "tool_path"]


class ToolRun(NamedTuple):
    returncode: int
    output: str  # stdout and stderr, in the order written


def run_tool(tool: str, *args, env: dict = None, cwd: str = None, timeout: float = 1200, check: bool = True) -> ToolRun:
    """``python tools/.../<tool> args`` (``tool`` as :func:`tool_path` takes it); with ``check``, fails the test (with the end of its output)
    unless it exits 0."""
    with tempfile.TemporaryDirectory() as tmp:
        output = os.path.join(tmp, "output.txt")
        status = run_python(tool_path(tool), args, output, env=env, cwd=cwd, timeout=timeout)
        with open(output, errors="replace") as f:
            run = ToolRun(status, f.read())
    assert not check or run.returncode == 0, f"tools/{tool} exited with {run.returncode}:\n{run.output[-3000:]}"
    return run


def load_tool(name: str, module: str = None):
    """The tool ``name`` (``"fit_cca.py"``) imported as a module (named ``module``, default
    ``_tool_<stem>``), to call its functions in this process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(module or "_tool_" + name[:-3], tool_path(name))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool
