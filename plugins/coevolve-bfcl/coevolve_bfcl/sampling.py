"""Random valid calls drawn from the live backend state, for the random explorer.

A call is built in three steps: pick one of the tools the agent can see now; fill each
required parameter (and each optional one with probability 0.3); check the result with the
same validator the agent's calls go through. A parameter value comes from, in order of
preference:

1. the live state of the backend (file and folder names in the current directory, tickers and
   order ids of the trading bot, tweet ids, user ids, ticket ids, card and booking ids...);
2. the values BFCL's *train-split* ground truth passes to that parameter of that function
   (a vocabulary: enum-like values such as ``mode='engage'``, city names, sectors);
3. scalars of the right type found in the backend's public state;
4. a plain random value of the right type.

Values are drawn with the environment's ``np_random`` so exploration is reproducible. The
functions read the live state through :class:`LiveTools`, which the environment provides, so
this module never imports the environment.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any, Callable, Protocol

import numpy as np

from . import _bfcl
from .calls import CallError, call_to_toolcall, check_arguments
from .splits import split_of


class LiveTools(Protocol):
    """What sampling reads of an episode in progress (``BFCLMultiTurnEnv`` provides it)."""

    def tool_names(self) -> list[str]:
        """The functions the agent can see now."""
        ...

    def owner_of(self, name: str) -> str:
        """The backend class that implements ``name``."""
        ...

    def instance_of(self, name: str) -> Any:
        """The live backend instance that implements ``name``."""
        ...

    def doc_of(self, name: str) -> dict[str, Any]:
        """BFCL's doc of ``name`` (its parameters' JSON schema)."""
        ...


WORDS = ["report", "notes", "budget", "draft", "summary", "data", "plan", "archive", "todo", "log",
         "project", "review", "update", "meeting", "final", "alpha", "beta", "results", "backup", "ideas"]
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{2,}")


@functools.lru_cache(maxsize=None)
def _vocabulary_frozen() -> dict[tuple[str, str], tuple[Any, ...]]:
    vocab: dict[tuple[str, str], list[Any]] = {}
    for cat in _bfcl.CATEGORIES:
        for e in _bfcl.load_entries(cat):
            if split_of(e["id"]) != "train":
                continue
            for turn in e["ground_truth"]:
                for call in turn:
                    try:
                        tc, pos = call_to_toolcall(call)
                    except Exception:
                        continue
                    args = dict(tc.arguments)
                    if pos:
                        params = _positional_names(tc.name)
                        args.update(zip(params, pos))
                    for k, v in args.items():
                        lst = vocab.setdefault((tc.name, k), [])
                        if v not in lst and len(lst) < 50:
                            lst.append(v)
    return {k: tuple(v) for k, v in vocab.items()}


@functools.lru_cache(maxsize=None)
def _owners() -> dict[str, str]:
    return {d["name"]: c for c in _bfcl.CLASSES for d in _bfcl.func_docs(c)}


def _positional_names(name: str) -> list[str]:
    cls_name = _owners().get(name)
    if cls_name is None:
        return []
    sig = inspect.signature(getattr(_bfcl.backend_class(cls_name), name))
    return [p for p in sig.parameters if p != "self"]


def vocabulary(name: str, param: str) -> list[Any]:
    return list(_vocabulary_frozen().get((name, param), ()))


def _pick(rng: np.random.Generator, items: list[Any]) -> Any:
    return items[int(rng.integers(0, len(items)))]


# ---------------------------------------------------------------- live-state providers
def _fs(inst: Any, name: str, param: str) -> list[Any]:
    cur = getattr(inst, "_current_dir", None)
    if cur is None:
        return []
    contents = getattr(cur, "contents", {}) or {}
    files = [n for n, v in contents.items() if hasattr(v, "content")]
    dirs = [n for n, v in contents.items() if hasattr(v, "contents")]
    if param in ("file_name", "file_name1", "file_name2"):
        if name == "touch" or (name == "echo" and param == "file_name"):
            return [w + ext for w in WORDS[:8] for ext in (".txt", ".md")] + files
        return files
    if param == "folder":
        return dirs + ([".."] if getattr(cur, "parent", None) is not None else [])
    if param == "dir_name":
        return dirs if name == "rmdir" else [w for w in WORDS if w not in contents]
    if param == "source":
        return files + dirs
    if param == "destination":
        return dirs + [f"{w}.txt" for w in WORDS[:5]]
    if param == "pattern":
        words = []
        for n in files:
            words.extend(_WORD.findall(str(contents[n].content))[:20])
        return words
    if param == "name":
        return files + dirs
    if param == "path":
        return ["."] + dirs
    return []


def _trading(inst: Any, name: str, param: str) -> list[Any]:
    stocks = list(getattr(inst, "stocks", {}) or {})
    if param in ("symbol", "stock"):
        if name == "remove_stock_from_watchlist":
            return list(getattr(inst, "watch_list", []) or []) or stocks
        return stocks
    if param == "stocks" and stocks:
        return [stocks[i: i + 3] for i in range(0, len(stocks), 3)]
    if param == "order_id":
        return [k for k in (getattr(inst, "orders", {}) or {}) if isinstance(k, int)]
    if param == "price":
        return [round(float(v.get("price", 0.0)), 2) for v in (getattr(inst, "stocks", {}) or {}).values() if isinstance(v, dict)]
    return []


def _twitter(inst: Any, name: str, param: str) -> list[Any]:
    tweets = getattr(inst, "tweets", {}) or {}
    users = sorted({t.get("username") for t in tweets.values() if isinstance(t, dict) and t.get("username")}
                   | set(getattr(inst, "following_list", []) or []))
    if param == "tweet_id":
        return [k for k in tweets if isinstance(k, int)]
    if param in ("username", "username_to_follow", "username_to_unfollow"):
        if param == "username_to_unfollow":
            return list(getattr(inst, "following_list", []) or [])
        return users
    if param == "mentioned_usernames" and users:
        return [[u] for u in users]
    if param == "keyword":
        return [w for t in tweets.values() if isinstance(t, dict) for w in _WORD.findall(str(t.get("content", "")))[:5]]
    return []


def _message(inst: Any, name: str, param: str) -> list[Any]:
    users = getattr(inst, "user_map", {}) or {}
    if param in ("user", "user_name"):
        return list(users)
    if param in ("user_id", "receiver_id"):
        return list(users.values())
    if param == "keyword":
        words = []
        for m in getattr(inst, "inbox", []) or []:
            if isinstance(m, dict):
                for v in m.values():
                    words.extend(_WORD.findall(str(v))[:5])
        return words
    return []


def _ticket(inst: Any, name: str, param: str) -> list[Any]:
    if param == "ticket_id":
        return [t.get("id") for t in getattr(inst, "ticket_queue", []) or [] if isinstance(t, dict) and isinstance(t.get("id"), int)]
    if param == "priority":
        return [1, 2, 3, 4, 5]
    return []


def _travel(inst: Any, name: str, param: str) -> list[Any]:
    if param == "access_token":
        tok = getattr(inst, "access_token", None)
        return [tok] if isinstance(tok, str) else []
    if param == "card_id":
        return list(getattr(inst, "credit_card_list", {}) or {})
    if param == "booking_id":
        return list(getattr(inst, "booking_record", {}) or {})
    if param in ("travel_from", "travel_to"):
        try:
            return list(inst.list_all_airports())
        except Exception:
            return []
    if param == "travel_class":
        return ["economy", "business", "first"]
    if param == "travel_date":
        return ["2024-11-15", "2024-12-01", "2025-01-10"]
    return []


def _vehicle(inst: Any, name: str, param: str) -> list[Any]:
    if param == "door":
        return [["driver"], ["passenger"], ["driver", "passenger", "rear_left", "rear_right"]]
    return []


PROVIDERS: dict[str, Callable[[Any, str, str], list[Any]]] = {
    "GorillaFileSystem": _fs, "TradingBot": _trading, "TwitterAPI": _twitter, "MessageAPI": _message,
    "TicketAPI": _ticket, "TravelAPI": _travel, "VehicleControlAPI": _vehicle,
}

#: Calls whose arguments belong together (credentials held by the backend itself).
def _paired(env: LiveTools, name: str) -> dict[str, Any]:
    inst = env.instance_of(name)
    if name == "authenticate_twitter" and getattr(inst, "username", None) and getattr(inst, "password", None):
        return {"username": inst.username, "password": inst.password}
    return {}


def _harvest(inst: Any, want: str) -> list[Any]:
    out: list[Any] = []

    def walk(v: Any, depth: int) -> None:
        if len(out) > 200 or depth > 4:
            return
        if isinstance(v, dict):
            for k, x in v.items():
                walk(k, depth + 1)
                walk(x, depth + 1)
        elif isinstance(v, (list, tuple, set)):
            for x in v:
                walk(x, depth + 1)
        elif want == "string" and isinstance(v, str) and 0 < len(v) <= 40:
            out.append(v)
        elif want == "integer" and isinstance(v, int) and not isinstance(v, bool) and abs(v) < 10**9:
            out.append(v)
        elif want in ("float", "number") and isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 10**9:
            out.append(v)

    for k, v in vars(inst).items():
        if not k.startswith("_"):
            walk(v, 0)
    return out


def _random_value(rng: np.random.Generator, schema: dict[str, Any]) -> Any:
    t = schema.get("type")
    if t == "integer":
        return int(rng.integers(1, 20))
    if t in ("float", "number"):
        return round(float(rng.uniform(1, 100)), 2)
    if t == "boolean":
        return bool(rng.integers(0, 2))
    if t in ("array", "tuple"):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {"type": "string"}
        return [_random_value(rng, items) for _ in range(int(rng.integers(1, 4)))]
    if t == "dict":
        props = schema.get("properties") or {}
        keys = list(props)
        if keys:
            k = _pick(rng, keys)
            return {k: _random_value(rng, props[k])}
        return {}
    return _pick(rng, WORDS)


def sample_value(env: LiveTools, name: str, param: str, schema: dict[str, Any], rng: np.random.Generator) -> Any:
    inst = env.instance_of(name)
    provider = PROVIDERS.get(env.owner_of(name))
    live = [v for v in (provider(inst, name, param) if provider else []) if v is not None]
    vocab = vocabulary(name, param)
    r = rng.random()
    if live and (r < 0.7 or not vocab):
        return _pick(rng, live)
    if vocab and r < 0.95:
        return _pick(rng, vocab)
    harvested = _harvest(inst, str(schema.get("type")))
    if harvested and rng.random() < 0.5:
        return _pick(rng, harvested)
    if vocab:
        return _pick(rng, vocab)
    return _random_value(rng, schema)


def sample_call(env: LiveTools, rng: np.random.Generator, attempts: int = 8) -> tuple[str, dict[str, Any]]:
    """A call ``(name, arguments)`` to one of the visible tools that passes argument checking."""
    names = env.tool_names()
    if not names:
        raise RuntimeError("no tools are visible in this state")
    last: tuple[str, dict[str, Any]] | None = None
    for _ in range(attempts):
        name = _pick(rng, names)
        doc = env.doc_of(name)
        params = (doc.get("parameters") or {}).get("properties") or {}
        required = set((doc.get("parameters") or {}).get("required") or [])
        args = _paired(env, name)
        for p, schema in params.items():
            if p in args:
                continue
            if p in required or rng.random() < 0.3:
                args[p] = sample_value(env, name, p, schema if isinstance(schema, dict) else {}, rng)
        last = (name, args)
        try:
            checked = check_arguments(name, getattr(env.instance_of(name), name), doc, args)
        except CallError:
            continue
        return name, checked
    assert last is not None
    return last
