"""The records that flow through a CoEvolve run.

Every record is a pydantic model so that it can be written to the run store, sent to another
process and read back without loss (``Model.model_validate_json(m.model_dump_json()) == m``).
Environment-specific detail lives in ``payload``/``info`` dictionaries of JSON values, so the
core never needs to know what a BFCL entry or an AppWorld world looks like.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from coevolve_sdk.ids import new_id

__all__ = [
    "ToolSpec",
    "Lineage",
    "Task",
    "Step",
    "Trajectory",
    "RolloutGroup",
    "Signal",
    "ExplorationContext",
    "Triplet",
    "CandidateTask",
    "Verdict",
    "TeacherUsage",
    "TeacherStages",
    "new_id",
]

JSONDict = dict[str, Any]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolSpec(_Record):
    """A function the agent may call, in the JSON-schema shape chat templates expect."""

    name: str
    description: str = ""
    parameters: JSONDict = Field(default_factory=lambda: {"type": "object", "properties": {}})

    def as_openai(self) -> JSONDict:
        """The ``{"type": "function", "function": {...}}`` shape used by chat templates and litellm."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class Lineage(_Record):
    """Where a synthetic task came from: enough to audit why it is in the pool."""

    parent_task_id: str | None = None
    signal_id: str | None = None
    signal_kind: str | None = None
    trajectory_id: str | None = None
    teacher: str | None = None
    prompt_version: str | None = None
    step_admitted: int | None = None
    exploration: JSONDict = Field(default_factory=dict)
    validation: JSONDict = Field(default_factory=dict)


class Task(_Record):
    """One entry of the task pool D_t.

    ``payload`` holds what the environment needs to instantiate the task (initial state,
    held-out functions, user turns); ``reference_actions`` is a known-good action sequence used
    for validation by replay and for warm starts.
    """

    id: str = Field(default_factory=lambda: new_id("task"))
    env: str
    query: str
    origin: Literal["seed", "synthetic", "benchmark"] = "seed"
    split: str = "train"
    payload: JSONDict = Field(default_factory=dict)
    reference_actions: list[str] = Field(default_factory=list)
    lineage: Lineage | None = None

    def fingerprint(self) -> str:
        """Identity for duplicate detection: normalised query plus the action sequence."""
        return task_fingerprint(self.query, self.reference_actions)


def task_fingerprint(query: str, actions: list[str]) -> str:
    norm_query = " ".join(query.lower().split())
    norm_actions = [" ".join(a.split()) for a in actions]
    blob = json.dumps([norm_query, norm_actions], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class Step(_Record):
    """One agent action and what the environment answered."""

    action: str
    observation: str
    reward: float = 0.0
    info: JSONDict = Field(default_factory=dict)


class Trajectory(_Record):
    """One episode of the agent on one task.

    The token fields are filled by the rollout engine: ``token_ids`` is the whole sequence
    (prompt, agent tokens and observation tokens), ``loss_mask`` is 1 on the agent's own
    sampled tokens only, and ``logprobs`` holds the sampling policy's log-probability of each
    token (0 where the mask is 0). ``prompt_length`` counts the initial prompt tokens.
    """

    id: str = Field(default_factory=lambda: new_id("traj"))
    task_id: str
    env: str = ""
    step: int = 0
    messages: list[JSONDict] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    score: float = 0.0
    success: bool = False
    action_pattern: str = ""
    truncated: bool = False
    info: JSONDict = Field(default_factory=dict)
    token_ids: list[int] | None = None
    loss_mask: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_length: int = 0

    @field_validator("score")
    @classmethod
    def _score_in_unit_interval(cls, v: float) -> float:
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"score must lie in [0, 1], got {v}")
        return v

    @property
    def actions(self) -> list[str]:
        return [s.action for s in self.steps]

    def without_tokens(self) -> Trajectory:
        """A copy without the token arrays, which are large and only the trainer needs."""
        return self.model_copy(update={"token_ids": None, "loss_mask": None, "logprobs": None})


class RolloutGroup(_Record):
    """The K trajectories of one task in one training step: GRPO's unit of comparison."""

    task: Task
    step: int
    trajectories: list[Trajectory]

    @property
    def scores(self) -> list[float]:
        return [t.score for t in self.trajectories]


class Signal(_Record):
    """A detector's finding: this trajectory (or group) deserves the teacher's attention."""

    id: str = Field(default_factory=lambda: new_id("sig"))
    kind: str
    task_id: str
    trajectory_id: str
    step: int
    reason: str = ""
    evidence: JSONDict = Field(default_factory=dict)
    trajectory_ids: list[str] = Field(default_factory=list)
    #: what a variation round varies for this signal: ``task`` (the signalled task's reference
    #: actions: the agent forgets or wavers on that task) or ``trajectory`` (the signalled
    #: trajectory's own successful actions: the behaviour itself is what is worth more of).
    vary: Literal["task", "trajectory"] = "task"


class ExplorationContext(_Record):
    """The teacher's reflection on one signalled trajectory, which steers re-exploration."""

    signal_kind: str
    summary: str
    failure_cause: str = ""
    instability_pattern: str = ""
    focus_pattern: list[str] = Field(default_factory=list)
    exploration_objectives: list[str] = Field(default_factory=list)
    do_not_repeat: list[str] = Field(default_factory=list)
    focus_tools: list[str] = Field(default_factory=list)
    #: actions whose structure exploration should vary (the signalled task's reference actions,
    #: or a rare trajectory's own actions); used by the random explorer's variation rounds
    focus_actions: list[str] = Field(default_factory=list)
    #: the other start tasks of the same evolution round (signalled tasks in a guided round,
    #: random pool tasks in an unguided one), which a teacher may join to this one to propose a
    #: composition the pool lacks. Filled only for a teacher that asks (``Teacher.wants_partners``)
    #: and never stored with the context (the tasks are in the pool already).
    partners: list[Task] = Field(default_factory=list, exclude=True)


class Triplet(_Record):
    """One re-exploration step: (action, observation, round id)."""

    action: str
    observation: str
    round: int
    step: int = 0
    reward: float = 0.0
    ok: bool = True
    #: part of a variation of the signalled behaviour (coevolve_sdk.evolution.variation), not of
    #: the free exploration that may follow it in the same round
    varied: bool = False
    #: for a step of a composed variation (RandomExplorer's ``compose``): the id of the partner
    #: task whose behaviour was joined to the signalled one in this round
    composed_with: str = ""


class CandidateTask(_Record):
    """A task the teacher proposes; it joins the pool only after validation by execution."""

    id: str = Field(default_factory=lambda: new_id("cand"))
    description: str = ""
    query: str
    reference_actions: list[str]
    completion_criterion: str = ""
    payload: JSONDict = Field(default_factory=dict)
    parent_task_id: str | None = None
    signal_id: str | None = None
    signal_kind: str | None = None
    trajectory_id: str | None = None
    teacher: str = ""
    prompt_version: str = ""
    exploration: JSONDict = Field(default_factory=dict)

    def fingerprint(self) -> str:
        return task_fingerprint(self.query, self.reference_actions)


class Verdict(_Record):
    """The validator's decision about one candidate, with the evidence behind it."""

    candidate_id: str
    accepted: bool
    reason: str
    score: float = 0.0
    evidence: JSONDict = Field(default_factory=dict)


class TeacherUsage(_Record):
    """What one teacher call cost; summed per signal and per admitted task in the store."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    failures: int = 0

    def add(self, other: TeacherUsage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd
        self.failures += other.failures


class TeacherStages(_Record):
    """What a model-backed teacher's replies did at each stage of its work, so far in the run.

    Why it exists: when a language model does the teacher's work, the usual outcome of a weak or
    mismatched model is not a crash but nothing: replies that do not parse, explorations with no
    usable action, no task proposed. Usage counts say that calls were made; this says what came
    of them and what the model actually wrote, so that "zero tasks admitted" can be read. Each
    evolution round stores the teacher's current one in its row of the run store and the run
    report shows it.

    ``stages`` maps a stage name (``reflect``, ``explore``, ``abstract``, ...) to counters whose
    names the teacher chooses (``replies``, ``parse_failures``, ``proposed``, ...); ``replies``
    maps a stage to the first few replies it got, cut short.
    """

    stages: dict[str, dict[str, int]] = Field(default_factory=dict)
    replies: dict[str, list[str]] = Field(default_factory=dict)
