"""Server mode's HTTP side against a real HTTP server standing in for ``vllm serve``.

The stand-in answers ``/health``, ``/v1/completions`` and ``/reset_prefix_cache`` with the JSON
shapes of vLLM 0.33's OpenAI-compatible server (read from ``entrypoints/openai/completion``:
choices prompt by prompt, ``n`` per prompt, ``token_ids`` with ``return_token_ids``,
``logprobs.token_logprobs``, ``prompt_logprobs`` keyed by token id). The NCCL weight push needs
vLLM and CUDA on both ends and is skipped here.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from coevolve_vllm.engine import ServerEngine
from coevolve_vllm.shaping import plan_requests, sampling_kwargs
from coevolve_vllm.sync import Unavailable


class StandIn(BaseHTTPRequestHandler):
    requests: list[tuple[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, code: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        StandIn.requests.append((self.path, None))
        self._reply(200, {}) if self.path == "/health" else self._reply(404, {"error": "no"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"] or 0)) or b"{}")
        StandIn.requests.append((self.path, body))
        if self.path == "/reset_prefix_cache":
            return self._reply(200, {})
        if self.path != "/v1/completions":
            return self._reply(404, {"error": "not found"})
        if body.get("max_tokens", 16) < 1:
            return self._reply(400, {"error": {"message": "max_tokens must be at least 1"}})
        prompts = body["prompt"]
        if prompts and isinstance(prompts[0], int):
            prompts = [prompts]
        choices = []
        for p in prompts:
            for j in range(body.get("n", 1)):
                # a deterministic "model": token = (last prompt token + j + k) % 50, stop at 2
                toks = [(p[-1] + j + k) % 50 for k in range(body["max_tokens"])]
                if j == 0:
                    toks = toks[:1] + [2]
                choices.append({
                    "index": len(choices), "text": "", "token_ids": toks, "finish_reason": "stop" if toks[-1] == 2 else "length",
                    "logprobs": {"token_logprobs": [-0.1 * (k + 1) for k in range(len(toks))], "tokens": [], "top_logprobs": [], "text_offset": []},
                    "prompt_logprobs": ([None] + [{str(t): {"logprob": -0.5, "rank": 1, "decoded_token": None}} for t in p[1:]])
                    if body.get("prompt_logprobs") is not None else None,
                })
        self._reply(200, {"id": "cmpl-1", "object": "text_completion", "model": body["model"], "choices": choices, "usage": {}})


@pytest.fixture
def server() -> Iterator[str]:
    StandIn.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_generate_batches_requests_by_n_and_converts_choices(server: str) -> None:
    eng = ServerEngine(server, model="tiny", timeout=10)
    eng.wait_ready(timeout=10)
    groups = plan_requests([[7, 8], [7, 8], [9], [7, 8], [11]])
    kws = [sampling_kwargs(n=g.n, max_new_tokens=3, temperature=0.9, greedy=False, stop_token_ids=[2]) for g in groups]
    samples = eng.generate(groups, kws)
    posted = [b for p, b in StandIn.requests if p == "/v1/completions"]
    assert sorted((b["n"], b["prompt"]) for b in posted) == [(1, [[9], [11]]), (3, [[7, 8]])]
    assert all(b["return_token_ids"] and b["logprobs"] == 0 and b["stop_token_ids"] == [2] for b in posted)
    assert [len(s) for s in samples] == [3, 1, 1]
    assert samples[0][0].token_ids == [8, 2] and samples[0][1].token_ids == [9, 10, 11]
    assert samples[1][0].token_ids == [9, 2] and samples[2][0].token_ids == [11, 2]
    assert samples[0][1].logprobs == pytest.approx([-0.1, -0.2, -0.3])


def test_probe_logprobs_and_prefix_cache_reset(server: str) -> None:
    eng = ServerEngine(server, model="tiny", timeout=10)
    assert eng.prompt_logprobs([3, 4, 5]) == [-0.5, -0.5]
    body = [b for p, b in StandIn.requests if p == "/v1/completions"][-1]
    assert body["prompt_logprobs"] == 0 and body["max_tokens"] == 1
    eng.reset_prefix_cache()
    assert StandIn.requests[-1][0] == "/reset_prefix_cache"


def test_server_errors_are_explained(server: str) -> None:
    eng = ServerEngine(server, model="tiny", timeout=10)
    groups = plan_requests([[1]])
    with pytest.raises(RuntimeError, match="HTTP 400: .*max_tokens"):
        eng.generate(groups, [{**sampling_kwargs(n=1, max_new_tokens=1, temperature=1, greedy=False, stop_token_ids=[2]), "max_tokens": 0}])
    with pytest.raises(ConnectionError, match="cannot reach"):
        ServerEngine("http://127.0.0.1:9", model="x", timeout=2)._request("GET", "/health")
    with pytest.raises(ConnectionError, match="did not become healthy"):
        ServerEngine("http://127.0.0.1:9", model="x", timeout=1).wait_ready(timeout=0.5, interval=0.1)


def test_only_the_nccl_path_applies_to_a_server(server: str) -> None:
    eng = ServerEngine(server, model="tiny")
    with pytest.raises(Unavailable):
        eng.sync_via("apply_model", lambda: [])
    with pytest.raises(Unavailable, match="no trainer model"):
        eng.sync_via("nccl", lambda: [])
