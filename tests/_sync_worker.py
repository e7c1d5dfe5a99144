"""Runs `artmem sync` in its own process, optionally killed (SIGKILL) at the first local
acknowledgement: after Honcho committed a delivery, before the pending document is removed."""

from __future__ import annotations

import os
import signal
import sys

from harness_plugin.cli import main


def _die_on_ack() -> None:
    real_unlink = os.unlink

    def unlink(path, *args, **kwargs):
        if str(path).endswith(".json") and kwargs.get("dir_fd") is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_unlink(path, *args, **kwargs)

    os.unlink = unlink


if __name__ == "__main__":
    if sys.argv[1] == "die-on-ack":
        _die_on_ack()
    sys.exit(main(sys.argv[2:]))
