"""One AppWorld world behind a loopback HTTP endpoint; run with AppWorld's own interpreter.

Why a script of our own rather than ``appworld serve environment``:

* ``appworld serve`` binds every interface (0.0.0.0): anyone who can reach the port runs code.
  This worker binds 127.0.0.1 only.
* AppWorld's per-execution time limit is a ``SIGALRM`` alarm, which only works in a process's
  main thread. This server is single-threaded, so every request runs in the main thread.
* Grading a synthetic task by state needs the world's database before and after; the stock
  server has no endpoint for that.
* A memory ceiling (``RLIMIT_AS``) is set here, before AppWorld is imported.
* Every request must carry the pool's secret token (header ``X-CoEvolve-Token``): binding to
  loopback keeps other machines out, the token keeps out other processes on this one (any local
  user could otherwise run code through ``/execute``). The token arrives in the environment
  variable ``COEVOLVE_WORKER_TOKEN`` (never on the command line, which every user can read in
  ``ps``); the worker takes it out of its environment before AppWorld loads, refuses to start
  without one, and compares in constant time. A request without the right token gets HTTP 403
  and nothing runs.

Protocol: JSON in, JSON out. Every reply is ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": "..."}``. When the server is listening it prints one line
``COEVOLVE_WORKER_READY <port>`` on stdout. It exits when its stdin reaches end of file (the
parent died or closed the pipe), so orphans never outlive the run.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import shutil
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler, HTTPServer

# Apps whose tables are not the user's world: bookkeeping (admin), documentation (api_docs) and
# the supervisor (passwords and the task record, whose answer is reported separately).
NOT_WORLD_APPS = {"admin", "api_docs", "supervisor"}

STATE: dict = {"world": None, "task_id": None, "experiment": None, "start": None}

TOKEN_ENV = "COEVOLVE_WORKER_TOKEN"
TOKEN_HEADER = "X-CoEvolve-Token"
_TOKEN: bytes = b""


def _limit_memory(megabytes: int) -> None:
    if megabytes <= 0:
        return
    import resource

    limit = megabytes * 1024 * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _exit_on_stdin_eof() -> None:
    try:
        while sys.stdin.buffer.read(1024):
            pass
    finally:
        os._exit(0)


def _plain(value):
    """JSON-friendly copy of a database value (datetimes become ISO text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _snapshot(world) -> dict:
    """Every row of the user's apps, keyed ``app.Model`` -> {id: row}."""
    out: dict = {}
    for app in world.task.allowed_apps:
        if app in NOT_WORLD_APPS or app not in world.models:
            continue
        for name, model in world.models[app].SQLModel.name_to_model().items():
            rows = {}
            for record in model.all():
                row = {k: _plain(v) for k, v in record.dict().items() if k not in ("_db_home_path", "record_hash")}
                rows[str(row.get("id"))] = row
            out[f"{app}.{name}"] = rows
    return out


def _diff(start: dict, end: dict) -> dict:
    changes: dict = {}
    for table in sorted(set(start) | set(end)):
        a, b = start.get(table, {}), end.get(table, {})
        added = [b[k] for k in b if k not in a]
        removed = [a[k] for k in a if k not in b]
        updated = []
        for k in a:
            if k in b and a[k] != b[k]:
                fields = sorted(f for f in set(a[k]) | set(b[k]) if a[k].get(f) != b[k].get(f))
                updated.append({"id": a[k].get("id"), "before": {f: a[k].get(f) for f in fields},
                                "after": {f: b[k].get(f) for f in fields}})
        if added or removed or updated:
            changes[table] = {"added": added, "removed": removed, "updated": updated}
    return changes


def _supervisor_task(world) -> dict:
    record = world.models.supervisor.Task.all()[0]
    answer = record.answer
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            pass
    if record.status is None or answer == "<<NOT_GIVEN>>":
        answer = None  # only complete_task(answer=...) gives an answer; the column's default is a marker
    return {"status": _plain(record.status), "answer": _plain(answer)}


def _close_world() -> None:
    world = STATE["world"]
    STATE.update(world=None, task_id=None, start=None)
    if world is not None:
        try:
            world.close()
        except Exception:
            pass
    exp = STATE.get("experiment")
    if exp:
        from appworld.common.path_store import path_store

        shutil.rmtree(os.path.join(path_store.experiment_outputs, exp), ignore_errors=True)
        STATE["experiment"] = None


def _sweep_dead_outputs() -> None:
    """Remove the experiment outputs of workers that were killed mid-episode.

    A worker closes its world's output folder itself, but one killed by SIGKILL (a hung world,
    a memory blow-up, a killed run) cannot; each worker started afterwards removes the folders
    whose worker pid no longer exists, so a long run does not fill the disk."""
    import re

    from appworld.common.path_store import path_store

    root = path_store.experiment_outputs
    if not os.path.isdir(root):
        return
    for name in os.listdir(root):
        m = re.fullmatch(r"coevolve-.+-w(\d+)", name)
        if not m:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        except PermissionError:
            pass  # alive, someone else's


def op_health(body: dict) -> dict:
    return {"pid": os.getpid(), "task_id": STATE["task_id"]}


def op_open(body: dict) -> dict:
    from appworld import AppWorld
    from appworld.apps import APP_TO_DESCRIPTION

    _close_world()
    task_id = body["task_id"]
    # the worker's pid in the name lets a later worker recognise outputs this one left behind
    # if it was killed (see _sweep_dead_outputs)
    experiment = f"{body['experiment']}-w{os.getpid()}"
    world = AppWorld(task_id=task_id, experiment_name=experiment,
                     timeout_seconds=int(body.get("timeout_seconds", 30)),
                     max_interactions=int(body.get("max_interactions", 1000)),
                     random_seed=int(body.get("random_seed", 100)))
    STATE.update(world=world, task_id=task_id, experiment=experiment)
    if body.get("snapshot"):
        STATE["start"] = _snapshot(world)
    sup = world.task.supervisor
    accounts = sorted({r.account_name for r in world.models.supervisor.AccountPassword.all()})
    return {
        "task_id": task_id,
        "instruction": world.task.instruction,
        "supervisor": {k: sup[k] for k in ("first_name", "last_name", "email", "phone_number")},
        "datetime": _plain(world.task.datetime),
        "allowed_apps": list(world.task.allowed_apps),
        "app_descriptions": {a: APP_TO_DESCRIPTION.get(a, "") for a in world.task.allowed_apps},
        "accounts": accounts,
        "has_ground_truth": bool(world.task.ground_truth),
    }


def _world():
    if STATE["world"] is None:
        raise RuntimeError("no world is open; call /open first")
    return STATE["world"]


def op_execute(body: dict) -> dict:
    world = _world()
    output = world.execute(str(body["code"]))
    return {"output": output, "completed": bool(world.task_completed())}


def op_evaluate(body: dict) -> dict:
    tracker = _world().evaluate(suppress_errors=True)
    return _plain(tracker.to_dict())


def op_outcome(body: dict) -> dict:
    world = _world()
    if STATE["start"] is None:
        raise RuntimeError("the world was opened without snapshot=true; its changes are unknown")
    return {"changes": _diff(STATE["start"], _snapshot(world)), **_supervisor_task(world),
            "completed": bool(world.task_completed())}


def op_close(body: dict) -> dict:
    _close_world()
    return {}


OPS = {"/health": op_health, "/open": op_open, "/execute": op_execute, "/evaluate": op_evaluate,
       "/outcome": op_outcome, "/close": op_close}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # keep stderr for real problems
        pass

    def _reply(self, code: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        """Constant-time check of the request's token; a refused request is answered and the
        connection closed without reading its body."""
        given = (self.headers.get(TOKEN_HEADER) or "").encode("utf-8", "replace")
        if _TOKEN and hmac.compare_digest(given, _TOKEN):
            return True
        self.close_connection = True
        self._reply(403, {"ok": False, "error": f"missing or wrong {TOKEN_HEADER} header: this worker serves only its own pool"})
        return False

    def do_GET(self):
        if self._authorised():
            self._dispatch({})

    def do_POST(self):
        if not self._authorised():
            return
        n = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
        except ValueError as e:
            self._reply(400, {"ok": False, "error": f"request body is not JSON: {e}"})
            return
        self._dispatch(body)

    def _dispatch(self, body: dict) -> None:
        op = OPS.get(self.path)
        if op is None:
            self._reply(404, {"ok": False, "error": f"unknown path {self.path}"})
            return
        try:
            result = op(body)
        except MemoryError:
            self._reply(500, {"ok": False, "error": "MemoryError: the worker ran out of its memory limit"})
            return
        except BaseException as e:  # report, keep serving; SystemExit from user code must not stop us
            if isinstance(e, KeyboardInterrupt):
                raise
            self._reply(500, {"ok": False, "error": f"{type(e).__name__}: {e}",
                              "traceback": traceback.format_exc(limit=5)})
            return
        self._reply(200, {"ok": True, "result": result})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One AppWorld world behind a loopback HTTP endpoint.")
    parser.add_argument("--root", required=True, help="APPWORLD_ROOT (holds data/ and experiments/)")
    parser.add_argument("--memory-mb", type=int, default=4096, help="address-space ceiling; 0 = none")
    parser.add_argument("--port", type=int, default=0, help="0 = any free port")
    args = parser.parse_args(argv)
    global _TOKEN
    _TOKEN = os.environ.pop(TOKEN_ENV, "").encode()
    if len(_TOKEN) < 16:
        print(f"refusing to serve without a secret token: set {TOKEN_ENV} (at least 16 characters) in the "
              f"worker's environment; the SDK's WorkerPool does this", file=sys.stderr)
        return 2
    os.environ["APPWORLD_ROOT"] = os.path.abspath(args.root)
    threading.Thread(target=_exit_on_stdin_eof, daemon=True).start()
    _limit_memory(args.memory_mb)
    import appworld  # noqa: F401  (imported before listening, so the first request is quick)
    from appworld import AppWorld  # noqa: F401

    _sweep_dead_outputs()
    server = HTTPServer(("127.0.0.1", args.port), Handler)
    print(f"COEVOLVE_WORKER_READY {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    finally:
        _close_world()
    return 0


if __name__ == "__main__":
    sys.exit(main())
