"""What every phrasedet evaluator does with several processes: gather what each process saw to
the main one, or, without gathering, let each process write files of its own."""
import os
from typing import List, Optional

from detectron2.utils import comm

__all__ = ["DistributedEvaluatorMixin"]


class DistributedEvaluatorMixin:
    """For a ``DatasetEvaluator`` with ``self._distributed`` (gather across processes) and
    ``self._output_dir``."""

    def _gathers(self) -> bool:
        return self._distributed and comm.get_world_size() > 1

    def _gather_seen(self, seen: list) -> Optional[List]:
        """Every process's ``seen`` items, concatenated in rank order, on the main process; ``None``
        on the others. Without gathering, ``seen`` itself."""
        if not self._gathers():
            return seen
        comm.synchronize()
        parts = comm.gather(seen, dst=0)
        if not comm.is_main_process():
            return None
        return [item for part in parts for item in part]

    def _output_path(self, name: str) -> str:
        """``<output_dir>/<name>``; without gathering, a process other than the only one adds
        ``.rank<r>`` (each process evaluates its own images)."""
        if not self._gathers() and comm.get_world_size() > 1:
            stem, ext = os.path.splitext(name)
            name = f"{stem}.rank{comm.get_rank()}{ext}"
        return os.path.join(self._output_dir, name)
