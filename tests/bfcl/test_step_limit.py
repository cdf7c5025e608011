"""The per-turn step limit agrees with BFCL's own harness, message for message.

BFCL's inference loop (``BaseHandler.inference_multi_turn_FC``) and its grader
(``eval_runner._evaluate_single_multi_turn_entry``) are run for real, with a handler whose
"model" replays a script; the environment is driven with the same script. For 19 to 22 messages
with tool calls in one turn, in the last turn and in an earlier one, both must cut the turn
after the same message and reach the same verdict.
"""

from __future__ import annotations

import contextlib
import io
import uuid
from pathlib import Path
from typing import Any

import pytest

from .helpers import make_env

ENTRY = "multi_turn_base_3"  # GorillaFileSystem only, two turns
IDLE = "pwd()"  # a call that changes no state: extra messages leave the answer correct
ANSWER = "Done."


def script_for(gt: list[list[str]], turn: int, n: int) -> list[list[str] | str]:
    """Per turn: the ground truth's calls in one message, then a plain answer; in ``turn``,
    ``n`` messages with calls (the ground truth's first, then idle ones) before the answer."""
    out: list[list[str] | str] = []
    for k, calls in enumerate(gt):
        out.append(list(calls))
        if k == turn:
            out.extend([[IDLE] for _ in range(n - 1)])
        out.append(ANSWER)
    return out


def bfcl_source(module: str, qualname: str) -> Any:
    """A function of the installed ``bfcl_eval``, compiled from its own source file.

    ``model_handler.base_handler`` and ``eval_checker.eval_runner`` import BFCL's whole model
    stack (provider SDKs, tree-sitter parsers, ...), which this plugin installs without. The
    functions needed here use only the multi-turn executor, the checker and a few constants,
    so their source is compiled against exactly those modules: BFCL's code, run unchanged.
    """
    import ast
    import copy

    from coevolve_bfcl import _bfcl

    path = Path(_bfcl.module("utils").__file__).parent / (module.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text())
    owner, _, name = qualname.rpartition(".")
    body = tree.body
    if owner:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == owner).body
    fn = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
    fn.decorator_list = []  # overrides.final only marks the method
    namespace: dict[str, Any] = {"deepcopy": copy.deepcopy}
    for mod in ("utils", "constants.default_prompts", "constants.executable_backend_config",
                "eval_checker.multi_turn_eval.multi_turn_utils", "eval_checker.multi_turn_eval.multi_turn_checker"):
        namespace.update({k: v for k, v in vars(_bfcl.module(mod)).items() if not k.startswith("__")})
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(path), "exec"), namespace)
    return namespace[name]


def bfcl_harness(entry: dict[str, Any], script: list[list[str] | str]) -> tuple[list[int], dict[str, Any]]:
    """BFCL's harness and grader on ``script``: (messages consumed per turn, verdict)."""
    from coevolve_bfcl import _bfcl

    queue = list(script)

    class Scripted:
        """A function-calling "model" that answers with the next item of the script."""

        inference_multi_turn_FC = bfcl_source("model_handler.base_handler", "BaseHandler.inference_multi_turn_FC")

        def __init__(self, name: str) -> None:
            self.model_name_underline_replaced = name

        def _pre_query_processing_FC(self, inference_data: dict, test_entry: dict) -> dict:
            return {"message": []}

        def _compile_tools(self, inference_data: dict, test_entry: dict) -> dict:
            return inference_data

        def add_first_turn_message_FC(self, inference_data: dict, messages: list) -> dict:
            inference_data["message"].extend(messages)
            return inference_data

        _add_next_turn_user_message_FC = add_first_turn_message_FC

        def _query_FC(self, inference_data: dict) -> tuple[Any, float]:
            return queue.pop(0), 0.0

        def _parse_query_response_FC(self, api_response: Any) -> dict:
            return {"model_responses": api_response, "input_token": 0, "output_token": 0}

        def _add_assistant_message_FC(self, inference_data: dict, model_response_data: dict) -> dict:
            return inference_data

        def _add_execution_results_FC(self, inference_data: dict, execution_results: list, model_response_data: dict) -> dict:
            return inference_data

        def decode_execute(self, result: Any, has_tool_call_tag: bool) -> list[str]:
            return list(result) if isinstance(result, list) else []  # plain text: no call

    evaluate = bfcl_source("eval_checker.eval_runner", "_evaluate_single_multi_turn_entry")
    name = "coevolve_step_limit_" + uuid.uuid4().hex[:12]
    handler = Scripted(name)
    test_entry = {"id": entry["id"], "question": [list(t) for t in entry["question"]],
                  "initial_config": entry["initial_config"], "involved_classes": entry["involved_classes"]}
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the harness prints every step
            responses, _ = handler.inference_multi_turn_FC(test_entry, include_input_log=False, exclude_state_log=True)
        prompt = {"id": entry["id"], "initial_config": entry["initial_config"], "involved_classes": entry["involved_classes"]}
        verdict = evaluate(handler, entry["id"], responses, entry["ground_truth"], prompt, name, entry["id"].rsplit("_", 1)[0])
    finally:
        _bfcl.purge_instances(name)
    return [len(t) for t in responses], verdict


def environment(task: Any, script: list[list[str] | str]) -> tuple[dict[int, int], dict[str, Any], float]:
    """The environment on ``script`` up to the cut: (messages taken per turn, grade, reward).

    After a cut in an earlier turn the environment moves on to the next user turn (BFCL stops
    the entry there); the rest of the episode is played with the ground truth, the best an
    agent could do, so the verdict shows that nothing after the cut rescues the entry.
    """
    env = make_env(max_steps=200)
    env.reset(options={"task": task})
    counts: dict[int, int] = {}
    reward = 0.0
    cut_turn = None
    for item in script:
        action = "[" + ", ".join(item) + "]" if isinstance(item, list) else item
        _, reward, terminated, truncated, info = env.step(action)
        counts[info["turn"]] = counts.get(info["turn"], 0) + 1
        if terminated or truncated:
            return counts, env.grade(), reward
        if info.get("step_limit_hit"):
            cut_turn = info["turn"]
            break
    gt = task.payload["entry"]["ground_truth"]
    assert cut_turn is not None
    for calls in gt[cut_turn + 1:]:
        env.step("[" + ", ".join(calls) + "]")
        _, reward, terminated, _, _ = env.step(ANSWER)
    assert terminated
    return counts, env.grade(), reward


@pytest.mark.parametrize("turn", [1, 0], ids=["last-turn", "earlier-turn"])
def test_step_limit_agrees_with_bfcl_harness(turn: int) -> None:
    env0 = make_env()
    task = next(t for t in env0.tasks("all") if t.id == ENTRY)
    entry = task.payload["entry"]
    assert len(entry["ground_truth"]) == 2
    for n in (19, 20, 21, 22):
        script = script_for(entry["ground_truth"], turn, n)
        bfcl_turns, bfcl_verdict = bfcl_harness(entry, script)
        env_turns, grade, reward = environment(task, script)
        cut = n > 20
        # BFCL: a turn ends with the plain answer (which it counts), or with the 21st message
        # with calls when the limit cuts it
        assert bfcl_turns[turn] == (21 if cut else n + 1), (n, bfcl_turns)
        # the environment stops the turn after the same message
        assert env_turns[turn] == bfcl_turns[turn], (n, env_turns, bfcl_turns)
        assert (grade["step_limit_turn"] == turn) == cut, (n, grade)
        # and reaches the same verdict: a cut in the last turn is graded normally (the script
        # is otherwise correct), a cut in an earlier turn fails the entry as force-terminated
        assert grade["valid"] == bfcl_verdict["valid"], (n, grade, bfcl_verdict)
        expected_valid = not (cut and turn == 0)
        assert bfcl_verdict["valid"] == expected_valid, (n, bfcl_verdict)
        if not expected_valid:
            assert bfcl_verdict["error"]["error_type"] == grade["error_type"] == "multi_turn:force_terminated"
        assert reward == (1.0 if expected_valid else 0.0)
