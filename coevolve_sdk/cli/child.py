"""Entry point of a run started by ``coevolve experiment``: ``coevolve`` that dies with its runner.

Runs are started in their own session, so that a Ctrl-C reaches only the runner, which then
stops them one by one and waits for each to record its interrupt. If the runner itself is
killed (SIGKILL leaves it no time to stop anything), Linux's parent-death signal delivers that
same Ctrl-C to every run, so no training is left running without its experiment.
"""

from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def _follow_parent() -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGINT))
    parent = os.environ.get("COEVOLVE_EXPERIMENT_PARENT")
    if parent and os.getppid() != int(parent):
        # the runner died between starting this process and the line above
        print("Interrupted: the experiment that started this run has stopped; it starts the run next time.", file=sys.stderr)
        sys.exit(130)


def main() -> None:
    _follow_parent()
    try:
        from coevolve_sdk.cli.main import main as cli_main

        sys.argv = ["coevolve", *sys.argv[1:]]
        cli_main()
    except KeyboardInterrupt:
        # before `coevolve run` took charge of Ctrl-C (it was still importing): nothing to keep
        print("Interrupted before the run started; the experiment starts it next time.", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
