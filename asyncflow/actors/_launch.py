"""Starting actor processes through the fork server, without ``__main__``.

multiprocessing's children import the parent's main script again before
they run (the reason for the ``if __name__ == "__main__"`` idiom). Actors do
not need it: their class and arguments travel by value (cloudpickle), and so
does anything from ``__main__`` in a message. Leaving it out means a script
without the idiom works and a child starts sooner. The only change to the
standard launch is that one: the preparation data loses its main-module keys.
"""

from __future__ import annotations

import io
import os
from multiprocessing import context, forkserver, popen_forkserver, reduction, spawn, util
from multiprocessing.process import BaseProcess
from typing import Any

__all__ = ["ActorProcess"]

_MAIN_KEYS = ("init_main_from_path", "init_main_from_name")


class _Popen(popen_forkserver.Popen):  # type: ignore[misc]
    def _launch(self, process_obj: Any) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)
        for key in _MAIN_KEYS:
            prep_data.pop(key, None)
        buf = io.BytesIO()
        context.set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            context.set_spawning_popen(None)
        self.sentinel, w = forkserver.connect_to_new_process(self._fds)  # type: ignore[attr-defined]
        # The child watches the read end of this pipe to learn that we died.
        parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds, (parent_w, self.sentinel))  # type: ignore[attr-defined]
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class ActorProcess(context.ForkServerProcess):
    """A fork-server process that skips re-importing ``__main__``."""

    @staticmethod
    def _Popen(process_obj: BaseProcess) -> _Popen:
        return _Popen(process_obj)
