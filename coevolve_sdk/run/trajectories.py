"""Reading what the agent did: a run's trajectories as conversations.

A run stores every training episode and every evaluation episode in ``run.sqlite`` (table
``trajectories``; ``phase`` is ``train`` or ``eval-<when>``: ``eval-initial``, ``eval-before``,
``eval-after``...). Reading them by hand means SQL and JSON; this module selects them by task,
step, phase and outcome and lays each one out as the conversation it was: the request, each
agent message with its tool calls and their arguments, each tool result, the reward and
whether the task was solved. ``coevolve trajectories RUN_DIR`` prints them (with colour on a
terminal, plain text otherwise), and the run report embeds a few evaluation episodes.

The store is opened read-only, so this works while a run is writing the folder and on run
folders of older versions (schema 1, compressed or plain rows).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

import typer

from coevolve_sdk.env.actions import calls_in
from coevolve_sdk.errors import CoEvolveError
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.records import Trajectory

__all__ = ["StoredTrajectory", "Turn", "select", "phases", "turns", "format_plain", "render_rich", "eval_examples_html",
           "trajectories_cmd"]

_TOOL_CALL_BLOCK = "<tool_call>"
_NO_TURNS = "(its turns were not kept: see store.keep_trajectory_steps)"


@dataclass
class StoredTrajectory:
    """One stored episode and the phase it was recorded in (``train``, ``eval-before``, ...)."""

    phase: str
    trajectory: Trajectory
    query: str | None = None  # the task's request, from the pool when the task is there


@dataclass
class Turn:
    """One line of a conversation as it is shown.

    ``kind``: ``system``, ``request`` (the first user message), ``user`` (a later user or
    environment message), ``agent`` (the agent's text), ``call`` (one tool call:
    ``name`` and ``arguments``), ``result`` (a tool's answer: ``name`` and ``text``)."""

    kind: Literal["system", "request", "user", "agent", "call", "result"]
    text: str = ""
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    error: bool = False


def select(store: RunStore, *, task: str | None = None, step: int | None = None, phase: str | None = None,
           success: bool | None = None, limit: int = 10) -> list[StoredTrajectory]:
    """The stored trajectories that match, oldest first; with ``limit`` > 0 only the newest
    ``limit`` of them. ``task`` is a task id or the start of one; ``phase`` is ``train``,
    ``eval`` (every evaluation) or one evaluation phase (``eval-after``, or just ``after``)."""
    where: list[str] = []
    args: list[Any] = []
    if task:
        where.append("(task_id = ? OR task_id LIKE ? ESCAPE '\\')")
        args += [task, task.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"]
    if step is not None:
        where.append("step = ?")
        args.append(int(step))
    if phase:
        if phase == "train":
            where.append("phase = 'train'")
        elif phase == "eval":
            where.append("phase LIKE 'eval-%'")
        else:
            where.append("phase = ?")
            args.append(phase if phase.startswith("eval-") else f"eval-{phase}")
    if success is not None:
        where.append("success = ?")
        args.append(int(success))
    sql = "SELECT phase, data FROM trajectories" + (" WHERE " + " AND ".join(where) if where else "")
    sql += " ORDER BY step DESC, rowid DESC" + (" LIMIT ?" if limit > 0 else "")
    if limit > 0:
        args.append(int(limit))
    rows = store._query(sql, tuple(args))  # the store's read-only connection and lock
    out = [StoredTrajectory(p, Trajectory.model_validate_json(store._traj_json(d))) for p, d in reversed(rows)]
    for st in out:
        t = store.get_task(st.trajectory.task_id)
        st.query = t.query if t is not None else None
    return out


def phases(store: RunStore) -> list[str]:
    """The phases a run folder has trajectories of."""
    return [r[0] for r in store._query("SELECT DISTINCT phase FROM trajectories ORDER BY phase")]


def turns(traj: Trajectory, *, system: bool = False) -> list[Turn]:
    """The conversation of an episode, one :class:`Turn` per thing said or done.

    An agent message is split into its text and its tool calls (the SDK's ``<tool_call>``
    format); a message in another action format (BFCL's python calls, say) is shown as it is."""
    out: list[Turn] = []
    seen_request = False
    for m in traj.messages:
        role = str(m.get("role", ""))
        content = m.get("content", "")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        if role == "system":
            if system:
                out.append(Turn("system", text))
        elif role == "user":
            out.append(Turn("user" if seen_request else "request", text))
            seen_request = True
        elif role == "assistant":
            calls = calls_in(text) if _TOOL_CALL_BLOCK in text else []
            if calls:
                said = _outside_calls(text)
                if said:
                    out.append(Turn("agent", said))
                out.extend(Turn("call", name=c.name, arguments=dict(c.arguments)) for c in calls)
            else:
                out.append(Turn("agent", text))
        else:  # tool (or an environment's own role)
            out.append(Turn("result", text, name=str(m.get("name", "") or role), error=text.startswith("Error")))
    return out


def _outside_calls(text: str) -> str:
    """The agent's words around its ``<tool_call>`` blocks."""
    parts: list[str] = []
    rest = text
    while _TOOL_CALL_BLOCK in rest:
        before, _, after = rest.partition(_TOOL_CALL_BLOCK)
        parts.append(before)
        _, _, rest = after.partition("</tool_call>")
    parts.append(rest)
    return " ".join(" ".join(parts).split())


def _args(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())


def _headline(st: StoredTrajectory) -> str:
    t = st.trajectory
    verdict = "solved" if t.success else "not solved"
    extra = ", truncated" if t.truncated else ""
    return f"{t.id}  task {t.task_id}  step {t.step}  {st.phase}  score {t.score:.2f} ({verdict}{extra})"


def _rewards(t: Trajectory) -> str:
    turns_n = int(t.info.get("turns", len(t.steps)) or len(t.steps))
    return f"reward {t.score:.2f}, {'solved' if t.success else 'not solved'}, {turns_n} agent message{'s' if turns_n != 1 else ''}" + (
        ", truncated (max_steps or the context ran out)" if t.truncated else "")


def format_plain(st: StoredTrajectory, *, system: bool = False, width: int = 400) -> str:
    """One episode as plain text (for a pipe, a file or a test)."""

    def cut(s: str) -> str:
        s = s.rstrip()
        return s if len(s) <= width else s[: width - 3] + "..."

    lines = [f"== {_headline(st)}"]
    if st.query is not None and not any(tn.kind == "request" for tn in turns(st.trajectory)):
        lines.append(f"request: {cut(st.query)}")
    for tn in turns(st.trajectory, system=system):
        if tn.kind == "call":
            lines.append(f"  agent -> {tn.name}({cut(_args(tn.arguments))})")
        elif tn.kind == "result":
            lines.append(f"  {tn.name or 'tool'} <- {cut(tn.text)}")
        else:
            label = {"request": "request", "user": "user", "agent": "agent", "system": "system"}[tn.kind]
            lines.append(f"{label}: {cut(tn.text)}" if tn.kind in ("request", "system") else f"  {label}: {cut(tn.text)}")
    if not st.trajectory.messages:
        lines.append(f"  {_NO_TURNS}")
    lines.append(f"  => {_rewards(st.trajectory)}")
    return "\n".join(lines)


def render_rich(st: StoredTrajectory, *, system: bool = False) -> Any:
    """One episode as a rich renderable (a panel with coloured roles) for a terminal."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    body: list[Any] = []
    if st.query is not None and not any(tn.kind == "request" for tn in turns(st.trajectory)):
        body.append(Text.assemble(("request ", "bold"), st.query))
    for tn in turns(st.trajectory, system=system):
        if tn.kind == "call":
            body.append(Text.assemble(("  agent → ", "cyan"), (tn.name, "bold cyan"), "(", _args(tn.arguments), ")"))
        elif tn.kind == "result":
            body.append(Text.assemble((f"  {tn.name or 'tool'} ← ", "red" if tn.error else "green"), tn.text.rstrip()))
        elif tn.kind == "agent":
            body.append(Text.assemble(("  agent: ", "cyan"), tn.text.rstrip()))
        elif tn.kind == "request":
            body.append(Text.assemble(("request ", "bold"), tn.text.rstrip()))
        else:
            body.append(Text.assemble((f"{tn.kind}: ", "dim"), tn.text.rstrip()))
    t = st.trajectory
    if not t.messages:
        body.append(Text(_NO_TURNS, style="dim"))
    body.append(Text(_rewards(t), style="bold green" if t.success else "bold red"))
    return Panel(Group(*body), title=_headline(st), title_align="left", border_style="green" if t.success else "red")


def eval_examples_html(store: RunStore, per_eval: int = 3) -> str:
    """A few episodes of each evaluation as HTML (for the run report): solved and unsolved
    ones when there are both, each a ``<details>`` block with the whole conversation."""
    e = html.escape
    blocks: list[str] = []
    for ev in store.evals():
        phase = f"eval-{ev['phase']}"
        rows = select(store, phase=phase, step=int(ev["step"]), limit=0)
        if not rows:
            continue
        failed = [r for r in rows if not r.trajectory.success]
        solved = [r for r in rows if r.trajectory.success]
        picked: list[StoredTrajectory] = []
        while len(picked) < per_eval and (failed or solved):  # alternate: unsolved first, they say more
            for group in (failed, solved):
                if group and len(picked) < per_eval:
                    picked.append(group.pop(0))
        items = []
        for st in picked:
            t = st.trajectory
            lines = []
            for tn in turns(t):
                if tn.kind == "call":
                    lines.append(f'<div class="call">agent &rarr; <b>{e(tn.name)}</b>({e(_args(tn.arguments))})</div>')
                elif tn.kind == "result":
                    cls = "result error" if tn.error else "result"
                    lines.append(f'<div class="{cls}">{e(tn.name or "tool")} &larr; {e(tn.text)}</div>')
                else:
                    lines.append(f'<div class="{tn.kind}"><b>{e(tn.kind)}</b>: {e(tn.text)}</div>')
            verdict = "solved" if t.success else "not solved"
            items.append(f'<details class="trajectory"><summary>task {e(t.task_id)}: score {t.score:.2f} ({verdict})</summary>'
                         f'{"".join(lines)}<div class="outcome">{e(_rewards(t))}</div></details>')
        blocks.append(f"<h3>{e(ev['phase'])} (step {ev['step']}): {len(picked)} of {len(rows)} episodes</h3>" + "".join(items))
    if not blocks:
        return ""
    return ("<h2>Evaluation episodes</h2><p>A few of each evaluation's episodes (unsolved ones first). All of them: "
            "<code>coevolve trajectories RUN_DIR --phase eval</code>.</p>" + "".join(blocks))


def open_run(run_dir: Path) -> RunStore:
    """The run folder's store, read-only (a clear error when it is not a run folder)."""
    from coevolve_sdk.storage.run_folder import open_store_read_only

    if not Path(run_dir).is_dir():
        raise CoEvolveError(f"{run_dir} does not exist or is not a folder. Pass the run_dir of a run started with `coevolve run`.")
    return open_store_read_only(Path(run_dir))


def trajectories_cmd(
    run_dir: Path = typer.Argument(..., help="A run folder (finished, running or stopped)."),
    task: Optional[str] = typer.Option(None, "--task", help="Only this task (an id, or the start of one)."),
    step: Optional[int] = typer.Option(None, "--step", help="Only this training step (evaluations: the step they ran after)."),
    phase: Optional[str] = typer.Option(None, "--phase", help="train, eval (every evaluation) or one evaluation: initial, before, after..."),
    success: Optional[bool] = typer.Option(None, "--success/--failed", help="Only solved (--success) or unsolved (--failed) episodes."),
    limit: int = typer.Option(10, "--limit", help="Show the newest N that match (0: all)."),
    system: bool = typer.Option(False, "--system", help="Also show the system prompt."),
) -> None:
    """Print a run's episodes as conversations: the request, the agent's messages and tool calls, the tool results, the reward.

    Reads run.sqlite read-only, so it works while the run is going. Coloured on a terminal,
    plain text when piped.
    """
    from rich.console import Console

    out = Console(soft_wrap=True, highlight=False)
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    if phase is not None and phase not in ("train", "eval") and not phase.replace("eval-", "").isidentifier():
        err.print(f"Error: --phase is train, eval or an evaluation's name (initial, before, after), not '{phase}'.", markup=False)
        raise typer.Exit(2)
    if limit < 0:
        err.print(f"Error: --limit is a count of episodes (0: all), not {limit}.", markup=False)
        raise typer.Exit(2)
    try:
        store = open_run(run_dir)
    except CoEvolveError as e:
        err.print(f"Error: {e}", markup=False)
        raise typer.Exit(2) from None
    try:
        found = select(store, task=task, step=step, phase=phase, success=success, limit=limit)
        if not found:
            have = ", ".join(phases(store)) or "none yet"
            err.print(f"No episode in {run_dir} matches these filters (phases stored: {have}).", markup=False)
            raise typer.Exit(1)
        for st in found:
            if out.is_terminal:
                out.print(render_rich(st, system=system))
            else:
                out.print(format_plain(st, system=system), markup=False)
                out.print("")
    finally:
        store.close()
