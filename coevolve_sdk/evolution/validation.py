"""Execution-grounded validation: a proposed task joins the pool only if it really works.

Each candidate is instantiated on its parent's state and its reference actions are executed in
a fresh environment. It is accepted when the environment's own grader passes the replay, or
(as the paper allows) when the environment gave a positive reward along the way. Every
rejection carries a reason that the run store keeps.

A candidate whose request is that of a held-out evaluation task (compared after
``normalise_request``: case, whitespace, trailing punctuation) is rejected before anything else,
with its own reason (``EVAL_REQUEST_REASON``): training on a test request verbatim would inflate
held-out success, and a small explorer finds such requests by chance often enough to matter.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

from coevolve_sdk.components.blame import ComponentError, blame
from coevolve_sdk.env.contract import checked_tasks
from coevolve_sdk.config import ValidationConfig
from coevolve_sdk.env.base import AgentEnv
from coevolve_sdk.records import CandidateTask, Task, Trajectory, Verdict

__all__ = ["Validator", "normalise_request", "evaluation_requests", "EVAL_REQUEST_REASON"]

#: the reason (before its ':') of a rejection for repeating an evaluation task's request; the
#: round records count rejections by this key
EVAL_REQUEST_REASON = "request of a held-out evaluation task"

_SPACE = re.compile(r"\s+")


def normalise_request(text: str) -> str:
    """A request as compared with the evaluation splits: lower case, runs of whitespace as one
    space, no surrounding whitespace and no trailing punctuation ("Count the nuts in bin B." and
    "count  the nuts in bin b" are the same request)."""
    return _SPACE.sub(" ", text).strip().lower().rstrip(".!?;:,… ").strip()


def evaluation_requests(env: AgentEnv, splits: Iterable[str]) -> dict[str, str]:
    """The normalised requests of every task of ``splits`` (the run's evaluation splits), each
    mapped to ``split/task id`` for the rejection's reason. A split the environment does not
    have raises: the run would fail at its first evaluation anyway, better before the seed pool."""
    out: dict[str, str] = {}
    for split in dict.fromkeys(splits):
        for task in checked_tasks(env, split):
            out.setdefault(normalise_request(task.query), f"{split}/{task.id}")
    return out


class Validator:
    """Checks candidates by execution. ``held_out`` maps normalised requests of the run's
    evaluation tasks (``evaluation_requests``) to their names: a candidate asking one of them is
    rejected, whatever the teacher."""

    def __init__(self, options: ValidationConfig | None = None, held_out: dict[str, str] | None = None) -> None:
        self.options = options or ValidationConfig()
        self.held_out = dict(held_out or {})

    def _held_out(self, query: str) -> str | None:
        return self.held_out.get(normalise_request(query)) if self.held_out else None

    def validate(
        self,
        env: AgentEnv,
        candidate: CandidateTask,
        base: Task | None,
        existing: set[str],
        judge: Callable[[Task, Trajectory], bool | None] | None = None,
    ) -> tuple[Verdict, Task | None]:
        """Check ``candidate`` by execution in ``env`` (an instance of its own). Returns the
        verdict and, when accepted, the task ready to admit.

        ``judge`` (the teacher's, when it has one) is asked last, about replays the grader
        accepted: since the grader of a synthetic task is derived from its own reference
        actions, only a judge can notice a query that does not describe what the actions do.
        A judge that abstains (None) changes nothing; a "no" rejects."""
        o = self.options

        def reject(reason: str, **evidence: object) -> tuple[Verdict, None]:
            return Verdict(candidate_id=candidate.id, accepted=False, reason=reason, evidence=dict(evidence)), None

        if not candidate.query.strip():
            return reject("empty query")
        if len(candidate.query) > o.max_query_chars:
            return reject(f"query is {len(candidate.query)} characters; the limit is {o.max_query_chars}")
        leak = self._held_out(candidate.query)
        if leak is not None:
            return reject(f"{EVAL_REQUEST_REASON}: {leak} asks the same", evaluation_task=leak)
        n = len(candidate.reference_actions)
        if n < o.min_actions:
            return reject(f"only {n} reference actions; at least {o.min_actions} are required")
        if n > o.max_actions:
            return reject(f"{n} reference actions; at most {o.max_actions} are allowed")
        if candidate.fingerprint() in existing:
            return reject("duplicate of a task already in the pool")
        try:
            with blame(env, "make_task", base):
                task = env.make_task(candidate, base)
        except Exception as e:  # a teacher may propose something the environment cannot set up
            named = e if isinstance(e, ComponentError) else None
            return reject(f"environment could not instantiate the task: {named.error if named else f'{type(e).__name__}: {e}'}",
                          where=named.frames[-1:] if named else [])
        if task.fingerprint() in existing:  # make_task may complete the actions: compare the task too
            return reject("duplicate of a task already in the pool")
        leak = self._held_out(task.query)  # make_task may rewrite the request too
        if leak is not None:
            return reject(f"{EVAL_REQUEST_REASON}: {leak} asks the same", evaluation_task=leak)
        limit = getattr(env.options, "max_steps", None)
        if limit is not None and len(task.reference_actions) > limit:
            return reject(f"the task needs {len(task.reference_actions)} actions but an episode allows max_steps={limit}")
        try:
            # the task's own actions: make_task may complete them (a final answer, say)
            with blame(env, "replay", task):
                result = env.replay(task, task.reference_actions)
        except Exception as e:  # step() never raises by contract: this is the environment's bug, named
            if isinstance(e, ComponentError):
                return reject(f"replay raised {e.error}", culprit=e.headline, where=e.frames)
            return reject(f"replay raised {type(e).__name__}: {e}")
        evidence = {
            "replay_score": result.score,
            "replay_errors": result.errors[:5],
            "actions_executed": len(result.steps),
            "observations": [s.observation[:200] for s in result.steps[:10]],
        }
        if result.errors and not o.allow_errors:
            return Verdict(candidate_id=candidate.id, accepted=False, reason=f"reference action failed: {result.errors[0][:200]}", score=result.score, evidence=evidence), None
        positive = any(s.reward > 0 for s in result.steps)
        if result.success or (o.accept_positive_reward and positive):
            why = "replay graded successful" if result.success else "replay earned a positive reward"
            if judge is not None:
                replayed = Trajectory(task_id=task.id, env=env.name, steps=result.steps, score=result.score, success=result.success)
                opinion = judge(task, replayed)
                evidence["judge"] = opinion
                if opinion is False:
                    return Verdict(candidate_id=candidate.id, accepted=False, reason="the teacher's judge says the replay does not accomplish the query",
                                   score=result.score, evidence=evidence), None
                if opinion is True:
                    why += "; the teacher's judge agrees"
            return Verdict(candidate_id=candidate.id, accepted=True, reason=why, score=result.score, evidence=evidence), task
        return Verdict(candidate_id=candidate.id, accepted=False, reason=f"replay graded {result.score:.2f}, below the success threshold", score=result.score, evidence=evidence), None
