"""Fixtures for the LLM teacher tests (the scripted provider lives in ``teacher_script``)."""

from __future__ import annotations

import os
from typing import Callable

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from coevolve_sdk.env.actions import format_tool_call  # noqa: E402
from coevolve_sdk.records import Signal, Step, Task, Trajectory  # noqa: E402

from .teacher_kv_env import KVEnv  # noqa: E402
from .teacher_script import Script, Scripted  # noqa: E402


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Scripted]:
    """``scripted(fn)`` registers provider ``scripted/`` answering with ``fn(stage, messages)``.

    ``fn`` returns the reply text, an exception instance to raise, or a callable
    ``model -> exception``. litellm's globals are restored afterwards.
    """
    import litellm

    monkeypatch.setattr(litellm, "custom_provider_map", list(litellm.custom_provider_map))
    monkeypatch.setattr(litellm, "provider_list", list(litellm.provider_list))
    monkeypatch.setattr(litellm, "_custom_providers", list(litellm._custom_providers))

    def install(script: Script, delay_s: float = 0.0) -> Scripted:
        s = Scripted(script, delay_s)
        litellm.custom_provider_map = [{"provider": "scripted", "custom_handler": s.handler()}]
        return s

    return install


@pytest.fixture
def env() -> KVEnv:
    return KVEnv()


@pytest.fixture
def seed_task(env: KVEnv) -> Task:
    return env.tasks()[0]


@pytest.fixture
def signalled(seed_task: Task) -> tuple[Signal, Trajectory]:
    traj = Trajectory(
        task_id=seed_task.id,
        env="teacher-kv",
        steps=[
            Step(action=format_tool_call("get", {"key": "colour"}), observation='{"colour": "red"}', info={"tool_names": ["get"]}),
            Step(action="I am done.", observation="Episode finished."),
        ],
        score=0.0,
        success=False,
        action_pattern="get",
    )
    sig = Signal(kind="forgetting", task_id=seed_task.id, trajectory_id=traj.id, step=20, reason="solved at step 10, failed now")
    return sig, traj
