"""Worker processes that each hold one AppWorld world, and the pool that lends them out.

One world per process is AppWorld's own limit (opening a second world resets the first, and an
open world freezes the clock of its whole process), so parallel episodes need parallel
processes. A worker is ``<appworld venv>/bin/python isolated/worker.py``, listening on a
loopback port it picks itself and announces on stdout.

The pool starts workers on demand up to ``max_workers``, checks a worker's health before lending
it, and replaces one that died or stopped answering (a request that outlives its deadline gets
the worker killed: a hung world costs its episode, never the run). Every worker is killed when
the pool closes, at interpreter exit (``atexit``), or when its parent dies (it exits at end of
file on its stdin).

Every request carries the pool's secret token (generated with ``secrets`` when the pool is made,
handed to each worker in its environment, never on its command line); a worker refuses requests
without it, so no other local process can run code through a worker's ``/execute``.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import secrets
import subprocess
import threading
import urllib.error
import urllib.request
import weakref
from typing import Any

from .runtime import Runtime, isolated_script

__all__ = ["Worker", "WorkerPool", "WorkerError", "WorkerFailure", "PoolExhausted", "shared_pool", "close_shared_pools"]

# Loopback only; a proxy from the environment (HTTP_PROXY) must never see these requests.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# How the secret reaches a worker and comes back on each request (see isolated/worker.py).
TOKEN_ENV = "COEVOLVE_WORKER_TOKEN"
TOKEN_HEADER = "X-CoEvolve-Token"


def new_token() -> str:
    """A fresh secret for a pool's workers (256 random bits)."""
    return secrets.token_urlsafe(32)


class WorkerError(RuntimeError):
    """The worker process is dead, or did not answer in time (it has been killed)."""


class WorkerFailure(RuntimeError):
    """The worker answered, but the operation failed inside it (message from AppWorld)."""


class PoolExhausted(RuntimeError):
    """More worlds are needed at once than ``max_workers`` allows."""


class Worker:
    """One AppWorld worker process and a small JSON-over-HTTP client for it."""

    def __init__(self, runtime: Runtime, memory_mb: int = 4096, start_timeout: float = 180.0, token: str | None = None) -> None:
        self.runtime = runtime
        self.memory_mb = memory_mb
        self._token = token or new_token()
        self._tail: collections.deque[str] = collections.deque(maxlen=40)
        workdir = os.path.join(runtime.root, "workers")
        os.makedirs(workdir, exist_ok=True)
        cmd = [runtime.python, "-W", "ignore", str(isolated_script("worker.py")), "--root", runtime.root,
               "--memory-mb", str(memory_mb)]
        env = runtime.subprocess_env()
        env[TOKEN_ENV] = self._token  # the environment, not argv: argv is world-readable in ps
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=env, cwd=workdir, start_new_session=True,
        )
        self.port = self._wait_ready(start_timeout)
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._drain, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _wait_ready(self, timeout: float) -> int:
        assert self.proc.stdout is not None
        result: dict[str, Any] = {}

        def read() -> None:
            for raw in self.proc.stdout:  # type: ignore[union-attr]
                line = raw.decode(errors="replace").rstrip()
                if line.startswith("COEVOLVE_WORKER_READY "):
                    result["port"] = int(line.split()[1])
                    return
                self._tail.append(line)

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        if "port" not in result:
            self.kill()
            tail = "\n".join(self._tail)
            raise WorkerError(f"AppWorld worker did not start within {timeout:.0f}s (exit code {self.proc.poll()}):\n{tail}")
        return int(result["port"])

    def _drain(self) -> None:
        try:
            for raw in self.proc.stdout:  # type: ignore[union-attr]
                self._tail.append(raw.decode(errors="replace").rstrip())
        except (OSError, ValueError):
            pass

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, path: str, body: dict[str, Any] | None = None, timeout: float = 60.0) -> Any:
        """POST ``body`` to ``path``; the worker's result, or WorkerError / WorkerFailure.

        A request that takes longer than ``timeout`` means the world is stuck (code that
        escaped AppWorld's own alarm, a deadlock): the worker is killed, since a half-finished
        world cannot be trusted for anything afterwards.
        """
        if not self.alive():
            raise WorkerError(f"worker {self.pid} is not running (exit code {self.proc.poll()})")
        data = json.dumps(body or {}).encode()
        req = urllib.request.Request(self.url + path, data=data,
                                     headers={"Content-Type": "application/json", TOKEN_HEADER: self._token})
        try:
            with _OPENER.open(req, timeout=timeout) as resp:
                payload = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            try:
                payload = json.loads(e.read())
            except ValueError:
                raise WorkerFailure(f"worker answered HTTP {e.code} on {path}") from None
        except (TimeoutError, OSError, urllib.error.URLError, ValueError) as e:
            timed_out = isinstance(e, TimeoutError) or "timed out" in str(e)
            self.kill()
            if timed_out:
                raise WorkerError(f"worker {self.pid} did not answer {path} within {timeout:.0f}s; it was killed") from None
            raise WorkerError(f"worker {self.pid} failed on {path} ({type(e).__name__}: {e}); exit code {self.proc.poll()}") from None
        if not payload.get("ok"):
            raise WorkerFailure(str(payload.get("error", "unknown error")))
        return payload.get("result")

    def healthy(self, timeout: float = 10.0) -> bool:
        try:
            self.call("/health", timeout=timeout)
            return True
        except (WorkerError, WorkerFailure):
            return False

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


class WorkerPool:
    """Lends workers to environment instances, one at a time, at most ``max_workers`` live."""

    def __init__(self, runtime: Runtime, max_workers: int = 16, memory_mb: int = 4096, start_timeout: float = 180.0) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.runtime = runtime
        self.max_workers = max_workers
        self.memory_mb = memory_mb
        self.start_timeout = start_timeout
        self._idle: list[Worker] = []
        self._busy: set[Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._token = new_token()
        self.started = 0
        self.replaced = 0
        _register_for_exit(self)

    def _start(self) -> Worker:
        w = Worker(self.runtime, memory_mb=self.memory_mb, start_timeout=self.start_timeout, token=self._token)
        with self._lock:  # environments acquire from several threads when the rollout steps them concurrently
            self.started += 1
        return w

    def acquire(self) -> Worker:
        """An idle healthy worker, or a new one; PoolExhausted when ``max_workers`` are lent."""
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("the AppWorld worker pool is closed")
                w = self._idle.pop() if self._idle else None
                if w is None:
                    if len(self._busy) >= self.max_workers:
                        raise PoolExhausted(
                            f"all {self.max_workers} AppWorld workers are in use (one world per process). "
                            f"Raise the environment option max_workers, or run fewer episodes at once "
                            f"(group size x tasks per step)."
                        )
                    self._busy.add(_PENDING)  # reserve the slot while starting outside the lock
            if w is not None:
                if w.healthy():
                    with self._lock:
                        self._busy.add(w)
                    return w
                w.kill()
                with self._lock:
                    self.replaced += 1
                continue
            try:
                w = self._start()
            finally:
                with self._lock:
                    self._busy.discard(_PENDING)
            with self._lock:
                self._busy.add(w)
            return w

    def release(self, worker: Worker) -> None:
        with self._lock:
            self._busy.discard(worker)
            if worker.alive() and not self._closed:
                self._idle.append(worker)
                return
        worker.kill()

    def discard(self, worker: Worker) -> None:
        """Kill a lent ``worker`` (dead or stuck) and free its slot; the next acquire starts a new one."""
        worker.kill()
        with self._lock:
            self._busy.discard(worker)
            self.replaced += 1

    def replace(self, worker: Worker) -> Worker:
        """Kill ``worker`` (dead or stuck) and lend a fresh one in its slot."""
        self.discard(worker)
        return self.acquire()

    def live(self) -> int:
        with self._lock:
            return len(self._idle) + len([w for w in self._busy if w is not _PENDING])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = self._idle + [w for w in self._busy if w is not _PENDING]
            self._idle, self._busy = [], set()
        for w in workers:
            w.kill()


class _Pending:
    pass


_PENDING: Any = _Pending()

_ALL_POOLS: "weakref.WeakSet[WorkerPool]" = weakref.WeakSet()
_SHARED: dict[tuple[str, int], WorkerPool] = {}
_SHARED_LOCK = threading.Lock()


def _register_for_exit(pool: WorkerPool) -> None:
    _ALL_POOLS.add(pool)


@atexit.register
def _close_all_at_exit() -> None:
    for pool in list(_ALL_POOLS):
        try:
            pool.close()
        except Exception:
            pass


def shared_pool(runtime: Runtime, max_workers: int = 16, memory_mb: int = 4096) -> WorkerPool:
    """The process-wide pool for a runtime and memory limit (every env instance shares it)."""
    key = (runtime.home, memory_mb)
    with _SHARED_LOCK:
        pool = _SHARED.get(key)
        if pool is None or pool._closed:
            pool = WorkerPool(runtime, max_workers=max_workers, memory_mb=memory_mb)
            _SHARED[key] = pool
        else:
            pool.max_workers = max(pool.max_workers, max_workers)
        return pool


def close_shared_pools() -> None:
    with _SHARED_LOCK:
        pools = list(_SHARED.values())
        _SHARED.clear()
    for p in pools:
        p.close()


