"""The warehouse world: bins of parts, four tools, and a small language of requests.

Everything here is plain Python over a ``Stock`` (bin -> item -> count), with no dependency on
the SDK, so the rules can be read, tested and reused on their own. The environment class wraps
them as tools.

Skills are the units of the request language. Three are *direct* (the numbers are in the
request) and three depend on the *live state* (the agent must look a count up and use it):

==========  ==============================================  ==============================
skill       request                                         calls
==========  ==============================================  ==============================
put         put 3 bolts in bin A                            add(A, bolts, 3)
take        take 2 nuts out of bin B                        remove(B, nuts, 2)
move        move 1 gears from bin A to bin C                move(A, C, gears, 1)
clear       take all the nuts out of bin B                  count(B, nuts) -> k; remove(B, nuts, k)
move_all    move all the gears from bin A to bin C          count(A, gears) -> k; move(A, C, gears, k)
report      tell me how many tiles are in bin D             count(D, tiles) -> k; answer with k
==========  ==============================================  ==============================

A task is one or two skills joined by ", then " (1 to 4 tool calls), performed on a random
starting stock. The same phrases describe explored action sequences (``describe_calls``), so
tasks found by exploration speak the language the benchmark's tasks speak.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

BINS: tuple[str, ...] = ("A", "B", "C", "D")
ITEMS: tuple[str, ...] = ("bolts", "nuts", "gears", "pipes", "tiles", "wires")
MAX_AMOUNT = 9

Stock = dict[str, dict[str, int]]

DIRECT_SKILLS = ("put", "take", "move")
STATE_SKILLS = ("clear", "move_all", "report")
SKILLS = DIRECT_SKILLS + STATE_SKILLS
#: A request names at most this many skills (every split is drawn within it, and explored call
#: sequences that would need more are not phrased: they are not requests of this world).
MAX_SKILLS = 2


class WarehouseError(Exception):
    """A request the warehouse refuses (the message is shown to the agent)."""


# ---------------------------------------------------------------------------- the four tools
def _check_bin(b: str) -> None:
    if b not in BINS:
        raise WarehouseError(f"there is no bin '{b}'; bins are {', '.join(BINS)}")


def _check_item(i: str) -> None:
    if i not in ITEMS:
        raise WarehouseError(f"'{i}' is not an item of this warehouse; items are {', '.join(ITEMS)}")


def _check_amount(n: int) -> None:
    if not 1 <= n <= MAX_AMOUNT:
        raise WarehouseError(f"amounts go from 1 to {MAX_AMOUNT}, got {n}")


def count(stock: Stock, bin: str, item: str) -> int:
    _check_bin(bin)
    _check_item(item)
    return stock.get(bin, {}).get(item, 0)


def add(stock: Stock, bin: str, item: str, n: int) -> None:
    _check_bin(bin)
    _check_item(item)
    _check_amount(n)
    stock.setdefault(bin, {})[item] = stock.get(bin, {}).get(item, 0) + n


def remove(stock: Stock, bin: str, item: str, n: int) -> None:
    have = count(stock, bin, item)
    _check_amount(n)
    if have < n:
        raise WarehouseError(f"bin {bin} holds {have} {item}, not {n}")
    left = have - n
    if left:
        stock[bin][item] = left
    else:
        del stock[bin][item]


def move(stock: Stock, src: str, dst: str, item: str, n: int) -> None:
    _check_bin(dst)
    if src == dst:
        raise WarehouseError("source and destination are the same bin")
    remove(stock, src, item, n)
    add(stock, dst, item, n)


# ---------------------------------------------------------------------------- calls and skills
@dataclass(frozen=True)
class Call:
    """One tool call: the tool's name and its keyword arguments."""

    name: str
    args: dict[str, Any]


def apply(stock: Stock, call: Call) -> str:
    """Carry out ``call`` on ``stock`` in place; return the tool's answer. Raises WarehouseError."""
    a = call.args
    if call.name == "count":
        return str(count(stock, a["bin"], a["item"]))  # arguments in phrase order: item, bin
    if call.name == "add":
        add(stock, a["bin"], a["item"], a["n"])
        return "ok"
    if call.name == "remove":
        remove(stock, a["bin"], a["item"], a["n"])
        return "ok"
    if call.name == "move":
        move(stock, a["src"], a["dst"], a["item"], a["n"])
        return "ok"
    raise WarehouseError(f"unknown tool '{call.name}'")


@dataclass
class Skill:
    name: str
    calls: list[Call]
    phrase: str
    answer: int | None = None


PHRASES: dict[str, str] = {
    "put": "put {n} {item} in bin {bin}",
    "take": "take {n} {item} out of bin {bin}",
    "move": "move {n} {item} from bin {src} to bin {dst}",
    "clear": "take all the {item} out of bin {bin}",
    "move_all": "move all the {item} from bin {src} to bin {dst}",
    "report": "tell me how many {item} are in bin {bin}",
}


# each phrase as a pattern, its fields as words: how a request is read back into its skills
_PHRASE_PATTERNS = {
    name: re.compile("^" + re.sub(r"\\{(\w+)\\}", r"(?P<\1>\\w+)", re.escape(phrase)) + "$", re.IGNORECASE)
    for name, phrase in PHRASES.items()
}


def skills_of(query: str) -> list[str]:
    """The skills a request names, in order, read back from its phrases ("?" for a part that is
    no phrase of the language). A task made by exploration has no drawn skills to record, so this
    is how its composition is known (a task's ``payload["skills"]``, and the experiment analysis)."""
    return [next((n for n, p in _PHRASE_PATTERNS.items() if p.match(part.strip())), "?")
            for part in query.rstrip(".").split(", then ")]


def join_phrases(phrases: list[str]) -> str:
    text = ", then ".join(phrases)
    return text[:1].upper() + text[1:] + "."


def states_count(message: str | None, expected: int) -> bool:
    """The final message states the expected count (as a number of its own)."""
    if message is None:
        return False
    return re.search(rf"(?<!\d){expected}(?!\d)", message) is not None


# ---------------------------------------------------------------------------- generation
def random_stock(rng: np.random.Generator) -> Stock:
    stock: Stock = {}
    for b in BINS:
        k = int(rng.integers(1, 4))
        items = rng.choice(len(ITEMS), size=k, replace=False)
        stock[b] = {ITEMS[int(i)]: int(rng.integers(1, 7)) for i in items}
    return stock


def _present(stock: Stock) -> list[tuple[str, str]]:
    return [(b, i) for b in BINS for i in sorted(stock.get(b, {}))]


def make_skill(name: str, stock: Stock, rng: np.random.Generator) -> Skill | None:
    """One instance of skill ``name`` valid on ``stock`` (not applied), or None if impossible."""
    present = _present(stock)
    pick = lambda seq: seq[int(rng.integers(0, len(seq)))]  # noqa: E731
    if name == "put":
        b, i, n = pick(BINS), pick(ITEMS), int(rng.integers(1, 6))
        return Skill(name, [Call("add", {"n": n, "item": i, "bin": b})], PHRASES[name].format(n=n, item=i, bin=b))
    if not present:
        return None
    b, i = pick(present)
    have = stock[b][i]
    if name == "take":
        n = int(rng.integers(1, have + 1))
        return Skill(name, [Call("remove", {"n": n, "item": i, "bin": b})], PHRASES[name].format(n=n, item=i, bin=b))
    dst = pick([x for x in BINS if x != b])
    if name == "move":
        n = int(rng.integers(1, have + 1))
        return Skill(name, [Call("move", {"n": n, "item": i, "src": b, "dst": dst})], PHRASES[name].format(n=n, item=i, src=b, dst=dst))
    look = Call("count", {"item": i, "bin": b})
    if name == "clear":
        return Skill(name, [look, Call("remove", {"n": have, "item": i, "bin": b})], PHRASES[name].format(item=i, bin=b))
    if name == "move_all":
        return Skill(name, [look, Call("move", {"n": have, "item": i, "src": b, "dst": dst})], PHRASES[name].format(item=i, src=b, dst=dst))
    if name == "report":
        return Skill(name, [look], PHRASES[name].format(item=i, bin=b), answer=have)
    raise ValueError(f"unknown skill '{name}'")


@dataclass
class Recipe:
    """How a split is drawn: how many skills a task has and how likely each skill is."""

    skills_per_task: dict[int, float]
    weights: dict[str, float]
    require_state_skill: bool = False
    max_calls: int = 4


@dataclass
class Drawn:
    initial: Stock
    skills: list[Skill]
    expected: Stock
    answer: int | None
    query: str
    actions: list[Call] = field(default_factory=list)


def draw_task(rng: np.random.Generator, recipe: Recipe) -> Drawn:
    """Draw skills one by one on an evolving stock until the recipe is met (rejection sampling)."""
    sizes, p = zip(*sorted(recipe.skills_per_task.items()))
    names, w = zip(*sorted(recipe.weights.items()))
    wp = np.array(w, dtype=float) / sum(w)
    for _ in range(1000):
        initial = random_stock(rng)
        stock = copy.deepcopy(initial)
        k = int(rng.choice(sizes, p=np.array(p) / sum(p)))
        skills: list[Skill] = []
        for j in range(k):
            name = str(rng.choice(names, p=wp))
            if name == "report" and j != k - 1:
                continue  # a report answers at the end: only as the last skill
            sk = make_skill(name, stock, rng)
            if sk is None:
                break
            try:
                for c in sk.calls:
                    apply(stock, c)
            except WarehouseError:
                break  # e.g. "all" of a pile larger than one call may move: draw again
            skills.append(sk)
        if len(skills) != k:
            continue
        calls = [c for s in skills for c in s.calls]
        if len(calls) > recipe.max_calls:
            continue
        if recipe.require_state_skill and not any(s.name in STATE_SKILLS for s in skills):
            continue
        if stock == initial and skills[-1].answer is None:
            continue  # a task that changes nothing and asks nothing cannot be graded
        return Drawn(initial, skills, stock, skills[-1].answer, join_phrases([s.phrase for s in skills]), calls)
    raise RuntimeError("could not draw a task for this recipe")


# ---------------------------------------------------------------------------- grading
def grade(initial: Stock, expected: Stock, final: Stock, answer: int | None, message: str | None) -> tuple[float, list[str]]:
    """Partial credit in [0, 1]: one check per (bin, item) count that the task or the agent
    changed, plus one for the answer when the task asks a question. Returns the score and the
    names of the failed checks. A do-nothing episode scores 0; an episode that does the task and
    something else besides loses the checks it broke."""
    keys = sorted({(b, i) for s in (initial, expected, final) for b in s for i in s[b]})
    touched = [k for k in keys if _get(initial, k) != _get(expected, k) or _get(initial, k) != _get(final, k)]
    failed = [f"{k[0]}/{k[1]}: {_get(final, k)} instead of {_get(expected, k)}" for k in touched if _get(final, k) != _get(expected, k)]
    checks = len(touched)
    if answer is not None:
        checks += 1
        if not states_count(message, answer):
            failed.append(f"answer: expected {answer}")
    if checks == 0:
        return 1.0, []
    return (checks - len(failed)) / checks, failed


def _get(stock: Stock, key: tuple[str, str]) -> int:
    return stock.get(key[0], {}).get(key[1], 0)


# ---------------------------------------------------------------------------- describing calls
def describe_calls(steps: list[tuple[Call, str]], max_skills: int = MAX_SKILLS) -> tuple[str, int | None]:
    """Phrase an executed call sequence in the request language; returns the request and the
    answer it expects (when it ends with a count that nothing used). A sequence that needs more
    than ``max_skills`` phrases is not a request of this language: the request is then "".

    A count followed by a removal or move of exactly the counted amount of the same item from the
    same bin is one state skill ("take all", "move all"); a count at the very end is a question.
    A count that nothing uses is left out of the request (its call stays harmless)."""
    phrases: list[str] = []
    answer: int | None = None
    i = 0
    while i < len(steps):
        call, obs = steps[i]
        a = call.args
        if call.name == "count":
            k = int(obs) if obs.isdigit() else None
            nxt = steps[i + 1][0] if i + 1 < len(steps) else None
            if k and nxt is not None and nxt.args.get("item") == a["item"] and nxt.args.get("n") == k:
                if nxt.name == "remove" and nxt.args.get("bin") == a["bin"]:
                    phrases.append(PHRASES["clear"].format(item=a["item"], bin=a["bin"]))
                    i += 2
                    continue
                if nxt.name == "move" and nxt.args.get("src") == a["bin"]:
                    phrases.append(PHRASES["move_all"].format(item=a["item"], src=a["bin"], dst=nxt.args["dst"]))
                    i += 2
                    continue
            if i == len(steps) - 1 and k is not None:
                phrases.append(PHRASES["report"].format(item=a["item"], bin=a["bin"]))
                answer = k
        elif call.name == "add":
            phrases.append(PHRASES["put"].format(**a))
        elif call.name == "remove":
            phrases.append(PHRASES["take"].format(**a))
        elif call.name == "move":
            phrases.append(PHRASES["move"].format(**a))
        i += 1
    if not phrases or len(phrases) > max_skills:
        return "", None
    return join_phrases(phrases), answer


# ---------------------------------------------------------------------------- the splits
def seed_recipe(state_share: float = 0.1) -> Recipe:
    """D_0's recipe: one or two skills, each drawn as a state skill with probability
    ``state_share`` (shared evenly by the three), as a direct skill otherwise."""
    d, st = (1.0 - state_share) / 3, state_share / 3
    return Recipe(skills_per_task={1: 0.5, 2: 0.5}, weights={"put": d, "take": d, "move": d, "clear": st, "move_all": st, "report": st})


#: D_0, the seed pool: mostly direct skills; the state skills appear in about one task in ten.
SEED_RECIPE = Recipe(skills_per_task={1: 0.5, 2: 0.5}, weights={"put": 0.3, "take": 0.3, "move": 0.3, "clear": 0.033, "move_all": 0.033, "report": 0.034})
#: dev and test: every task needs at least one state skill; 2 to 4 calls. Mostly two skills: the
#: language has only 120 one-skill requests with a state skill (24 "take all", 72 "move all", 24
#: questions), and no request may appear in two splits, so a 1,024-task test split with many of
#: them would leave none for the other splits.
HELD_OUT_RECIPE = Recipe(skills_per_task={1: 0.1, 2: 0.9}, weights={"put": 0.12, "take": 0.12, "move": 0.12, "clear": 0.22, "move_all": 0.22, "report": 0.2},
                         require_state_skill=True)

#: Fixed before any run: each split comes from its own generator seed, so no split can see another.
#: test holds 1,024 tasks so that one task is 0.1 point and the binomial noise of a final
#: evaluation (about 1 point at 10% success) is well below the effects compared; dev holds 512.
SPLITS: dict[str, tuple[int, int, Recipe]] = {
    "train": (1001, 512, SEED_RECIPE),
    "dev": (2002, 512, HELD_OUT_RECIPE),
    "test": (3003, 1024, HELD_OUT_RECIPE),
}

CallSampler = Callable[[Stock, np.random.Generator], Call]
