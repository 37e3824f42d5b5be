"""Loopback model servers for the llm agent tests: real HTTP on 127.0.0.1, real wire
formats of the OpenAI chat-completions and Anthropic messages APIs, scripted answers.

Only the model's answers are fake; the SDK clients, their HTTP stack, timeouts and
error mapping are the real ones.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kernelloop.agents.base import AgentContext


@dataclass
class Reply:
    text: str
    input_tokens: int = 1000
    output_tokens: int = 200
    cache_read: int = 0
    cache_write: int = 0
    delay_s: float = 0.0  # sleep before answering (longer than the client timeout = a timeout)
    stop: str = ""  # finish/stop reason; default "stop" / "end_turn"


@dataclass
class Fail:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "scripted failure"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    raw: str

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(self.raw)

    def prompt_text(self) -> str:
        """Every piece of text the client sent to the model, system prompt included."""
        b = self.body
        parts = [b.get("system", "")] if isinstance(b.get("system"), str) else []
        parts += [m["content"] for m in b["messages"] if isinstance(m["content"], str)]
        return "\n".join(parts)


class ModelServer:
    """`kind` is "openai" (serves /v1/chat/completions) or "anthropic" (/v1/messages)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.script: deque[Reply | Fail] = deque()
        self.received: list[Received] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
                with server._lock:
                    server.received.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
                    )
                    step = server.script.popleft() if server.script else Fail(500)
                status, payload, headers = server._respond(self.path, step, json.loads(raw))
                if isinstance(step, Reply) and step.delay_s:
                    time.sleep(step.delay_s)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (the timeout case): nothing to answer

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        # OpenAI-compatible servers are addressed with /v1 in the base URL; Anthropic's
        # SDK appends /v1/messages itself.
        return f"http://{host}:{port}" + ("/v1" if self.kind == "openai" else "")

    def start(self) -> ModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _respond(
        self, path: str, step: Reply | Fail, body: dict[str, Any]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        want = "/v1/chat/completions" if self.kind == "openai" else "/v1/messages"
        if path != want:
            return 404, self._error(404, f"no route {path}"), {}
        if isinstance(step, Fail):
            return step.status, self._error(step.status, step.message), step.headers
        if self.kind == "openai":
            usage: dict[str, Any] = {
                "prompt_tokens": step.input_tokens,
                "completion_tokens": step.output_tokens,
                "total_tokens": step.input_tokens + step.output_tokens,
            }
            if step.cache_read:
                usage["prompt_tokens_details"] = {"cached_tokens": step.cache_read}
            return 200, {
                "id": "chatcmpl-loopback",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": step.text},
                    "finish_reason": step.stop or "stop",
                }],
                "usage": usage,
            }, {}  # fmt: skip
        return 200, {
            "id": "msg_loopback",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": step.text}],
            "stop_reason": step.stop or "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": step.input_tokens,
                "output_tokens": step.output_tokens,
                "cache_creation_input_tokens": step.cache_write,
                "cache_read_input_tokens": step.cache_read,
            },
        }, {}  # fmt: skip

    def _error(self, status: int, message: str) -> dict[str, Any]:
        kind = {429: "rate_limit_error", 401: "authentication_error", 529: "overloaded_error"}
        etype = kind.get(status, "api_error")
        if self.kind == "openai":
            return {"error": {"message": message, "type": etype, "param": None, "code": None}}
        return {"type": "error", "error": {"type": etype, "message": message}}


BASE_SOURCE = '''"""A toy row kernel: the agent tests never run it, they only edit it."""
import triton
import triton.language as tl

BLOCK = 1024
NUM_WARPS = 4


@triton.jit
def _row_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + row * n + offs, x * 2.0, mask=offs < n)


def forward(x):
    y = x.new_empty(x.shape)
    _row_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK, num_warps=NUM_WARPS)
    return y
'''

PROFILE = (
    "dram_throughput_pct=41.2 | achieved_occupancy_pct=23.5 (limiter: registers) | MARK-PROFILE"
)
HISTORY = "round 1: BLOCK 1024->2048: +0.4% (noise) — rejected | MARK-HISTORY"


def context(round_index: int = 2, source: str = BASE_SOURCE) -> AgentContext:
    return AgentContext(
        task_name="toy_rows",
        task_description="Scale each row by two.",
        language="triton",
        entry="forward",
        best_source=source,
        best_id="v3",
        profile_summary=PROFILE,
        history_digest=HISTORY,
        rules_text="at most 3 edit points; keep the signature of forward",
        round_index=round_index,
        rounds_left=5,
        tunables=("BLOCK", "NUM_WARPS"),
        device_name="NVIDIA H200",
        best_objective=1.8,
        best_pct_of_floor={"4096x8000": 61.0},
    )


def good_answer(warps: int = 8, direction: str = "more warps per row") -> str:
    new = BASE_SOURCE.replace("NUM_WARPS = 4", f"NUM_WARPS = {warps}")
    return (
        f"### Candidate 1\nDirection: {direction}\n"
        "Hypothesis: occupancy is limited by registers at 23.5%, more warps hide latency.\n"
        "Predicted effect: -10% median time on all shapes\n\n"
        f"```python\n{new}```\n"
    )
