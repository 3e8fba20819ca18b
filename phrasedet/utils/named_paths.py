"""``NAME=PATH`` command-line values (``--features cnn=DIR``, ``--run NAME=RUN_DIR``, ...), shared by
the tools that compare several named inputs in one table."""
from typing import List, Optional, Sequence, Tuple

__all__ = ["named_paths"]


def named_paths(values: Optional[Sequence[str]], flag: str) -> List[Tuple[str, str]]:
    """``[(name, path)]`` of ``values`` given to ``flag`` (None: none given). Raises SystemExit
    naming the flag for a value without a name or a path, or a name given twice."""
    out = []
    for v in values or ():
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"{flag} takes NAME=PATH, got {v!r}")
        out.append((name, path))
    names = [n for n, _ in out]
    if len(set(names)) < len(names):
        raise SystemExit(f"{flag}: each NAME once, got {names}")
    return out
