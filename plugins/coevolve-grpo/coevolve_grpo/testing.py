"""Small environments with a verifiable reward, for tests, benchmarks and the CPU demo.

``PickToolEnv``: the agent sees a handful of button tools and one request; the episode is
solved when it calls the task's target tool (``payload["target"]``), which the request does not
name. A model warm-started on every tool presses each with about equal probability, so the
starting reward is about 1 / number of tools; only reinforcement can find the right one.
With ``max_steps > 1`` a wrong press is answered by a tool message and the agent may try again,
which exercises multi-turn token accounting.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from coevolve_sdk import (
    ActionParseError,
    AgentEnv,
    EnvOptions,
    Outcome,
    Task,
    ToolSpec,
    format_tool_call,
    parse_tool_calls,
)

__all__ = ["PickToolEnv", "PickToolOptions", "BUTTONS"]

BUTTONS = ["press_red", "press_green", "press_blue", "press_amber", "press_violet", "press_cyan"]


class PickToolOptions(EnvOptions):
    max_steps: int = Field(1, ge=1)
    buttons: int = Field(6, ge=2, le=len(BUTTONS))


class PickToolEnv(AgentEnv):
    name: ClassVar[str] = "pick-tool"
    Options: ClassVar[type[EnvOptions]] = PickToolOptions
    QUERY: ClassVar[str] = "Press the right button."

    def _buttons(self) -> list[str]:
        return BUTTONS[: self.options.buttons]  # type: ignore[attr-defined]

    def tasks(self, split: str = "train") -> list[Task]:
        """One task per button (all with the same request): the warm-start set."""
        return [
            Task(id=f"pick-{b}", env=self.name, query=self.QUERY, split=split, payload={"target": b},
                 reference_actions=[format_tool_call(b, {})])
            for b in self._buttons()
        ]

    def target_task(self, button: str = "press_blue") -> Task:
        return Task(id=f"target-{button}", env=self.name, query=self.QUERY, payload={"target": button},
                    reference_actions=[format_tool_call(button, {})])

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(name=b, description="Press this button.") for b in self._buttons()]

    def begin(self, task: Task) -> list[dict[str, Any]]:
        self._solved = False
        return [{"role": "system", "content": "You press buttons."}, {"role": "user", "content": task.query}]

    def act(self, action: str) -> Outcome:
        try:
            calls = parse_tool_calls(action)
        except ActionParseError as e:
            return Outcome(messages=[{"role": "tool", "content": f"error: {e}"}], error=str(e))
        if len(calls) != 1 or calls[0].name not in self._buttons():
            return Outcome(messages=[{"role": "tool", "content": "error: call exactly one button"}], error="bad call")
        name = calls[0].name
        assert self.task is not None
        if name == self.task.payload.get("target"):
            self._solved = True
            return Outcome(messages=[{"role": "tool", "content": "click. correct"}], done=True, tool_names=[name])
        return Outcome(messages=[{"role": "tool", "content": "click. nothing happened"}], tool_names=[name])

    def score(self) -> float:
        return 1.0 if getattr(self, "_solved", False) else 0.0

    def sample_action(self) -> str:
        b = self._buttons()
        return format_tool_call(b[int(self.np_random.integers(0, len(b)))], {})
