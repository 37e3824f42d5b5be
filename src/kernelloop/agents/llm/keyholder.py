"""The key holder: the only process of a `kernelloop run` that holds the model keys.

`kernelloop` re-executes itself with an allow-listed environment before any command runs
(`sandbox/trusted_env.py` says why): task code — references, input generators, imported
problem files, e2e models — runs in that process, so it must never hold a key. `run` and
`suite` talk to models, so the launcher first starts this module as a child with the full
environment and a socket; the re-executed loop inherits the other end (its number in
`KERNELLOOP_KEYHOLDER_FD`) and `make_provider` hands out a `RemoteProvider` that asks the
key holder to build the real provider and to `complete()` through it.

The loop's side is not trusted here: task code in it can write to the socket. So the
protocol is JSON lines (never pickle), every field is checked, and a provider may only
be built for a URL the key holder itself allows — its environment's `*_BASE_URL`, a URL
named on the command line (`KERNELLOOP_KEYHOLDER_URLS`, set by the launcher) or the SDK's
default — so the key is never sent to a server task code chose. Task code can still make
calls through it (spend, not read, the key). The process is made non-dumpable, so other
processes of the user (task code included) cannot read its memory or `/proc/PID/environ`;
root can (docs/security.md, "Task code and the model keys").
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
from dataclasses import asdict
from typing import Any

from kernelloop.agents.llm import errors
from kernelloop.agents.llm.providers import (
    BASE_URL_ENV,
    KEY_ENV,
    PROVIDERS,
    Completion,
    Usage,
    parse_model_spec,
    sdk_provider,
)
from kernelloop.agents.llm.retry import RetryPolicy
from kernelloop.errors import KernelloopError

FD_ENV = "KERNELLOOP_KEYHOLDER_FD"
URLS_ENV = "KERNELLOOP_KEYHOLDER_URLS"
MAX_LINE = 64 << 20  # a prompt is at most a few MB; anything larger is not ours
_KINDS = {
    c.__name__: c
    for c in (
        errors.MissingKeyError,
        errors.ModelRequestError,
        errors.ModelUnavailableError,
        errors.AgentSpecError,
    )
}


# ---------------------------------------------------------------- the loop's side


class RemoteProvider:
    """A provider whose key and SDK client live in the key holder."""

    def __init__(self, provider: str, model: str, **options: Any) -> None:
        self.provider, self.model = provider, model
        retry = options.get("retry") or RetryPolicy()
        opened = _ask(
            {
                "op": "open",
                "provider": provider,
                "model": model,
                "base_url": options.get("base_url"),
                "timeout_s": options.get("timeout_s", 600.0),
                "max_tokens": options.get("max_tokens", 8192),
                "temperature": options.get("temperature"),
                "retry": [retry.max_attempts, retry.base_s, retry.max_s],
            }
        )
        self.handle = int(opened["handle"])
        self.base_url = opened.get("base_url")

    def __repr__(self) -> str:
        return f"RemoteProvider(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"

    def complete(self, system: str, messages: list[dict[str, str]]) -> Completion:
        got = _ask(
            {"op": "complete", "handle": self.handle, "system": system, "messages": messages}
        )
        return Completion(**{**got, "usage": Usage(**got["usage"])})


_lock = threading.Lock()
_conn: socket.socket | None = None


def make_provider(spec: str, *, default_provider: str | None = None, **options: Any) -> Any:
    """A provider from 'openai:MODEL' / 'anthropic:MODEL' (options: see
    providers._SdkProvider). In a process that runs task code (the launcher passed
    FD_ENV) and was given no key environment, it holds no key: the key holder (a child
    started by the launcher with the keys) builds the client and makes the calls."""
    if os.environ.get(FD_ENV) and options.get("env") is None:
        provider, model = parse_model_spec(spec, default_provider)
        options.pop("sleep", None)  # the key holder waits between retries itself
        return RemoteProvider(provider, model, **options)
    return sdk_provider(spec, default_provider=default_provider, **options)


def _ask(request: dict) -> dict:
    global _conn
    with _lock:
        if _conn is None:
            _conn = socket.socket(fileno=int(os.environ[FD_ENV]))
        _conn.sendall(json.dumps(request).encode() + b"\n")
        line = _read_line(_conn)
    if line is None:
        raise KernelloopError(
            "the model key holder ended (see the messages above); start the run again."
        )
    answer = json.loads(line)
    if "error" in answer:
        kind = _KINDS.get(answer["error"]["kind"], KernelloopError)
        raise kind(answer["error"]["message"])
    return answer["ok"]


def _read_line(conn: socket.socket) -> bytes | None:
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 16)
        if not chunk:
            return None
        data += chunk
        if len(data) > MAX_LINE:
            return None
    return bytes(data)


# ---------------------------------------------------------------- the key holder


def _allowed_urls(environ: dict[str, str]) -> set[str]:
    urls = {environ.get(v, "") for v in BASE_URL_ENV.values()}
    urls |= set(environ.get(URLS_ENV, "").splitlines())
    return {u for u in urls if u}


def _scrub(text: str, environ: dict[str, str]) -> str:
    for name in KEY_ENV.values():
        secret = environ.get(name, "")
        if len(secret) > 3:
            text = text.replace(secret, "***")
    return text[:2000]


class _Holder:
    def __init__(self, environ: dict[str, str]) -> None:
        self.environ = environ
        self.allowed = _allowed_urls(environ)
        self.providers: list[Any] = []

    def answer(self, request: Any) -> dict:
        if not isinstance(request, dict):
            raise errors.ModelRequestError("the key holder got a request it cannot read.")
        if request.get("op") == "open":
            return self._open(request)
        if request.get("op") == "complete":
            handle = request.get("handle")
            system, messages = request.get("system"), request.get("messages")
            if not (
                isinstance(handle, int)
                and 0 <= handle < len(self.providers)
                and isinstance(system, str)
                and isinstance(messages, list)
                and all(
                    isinstance(m, dict) and all(isinstance(v, str) for v in m.values())
                    for m in messages
                )
            ):
                raise errors.ModelRequestError("the key holder got a malformed completion request.")
            return asdict(self.providers[handle].complete(system, messages))
        raise errors.ModelRequestError("the key holder got a request it does not serve.")

    def _open(self, r: dict) -> dict:
        provider, model, url = r.get("provider"), r.get("model"), r.get("base_url")
        retry = r.get("retry")
        numbers = [r.get("timeout_s"), r.get("max_tokens"), *(retry or [])]
        if not (
            provider in PROVIDERS
            and isinstance(model, str)
            and (url is None or isinstance(url, str))
            and isinstance(retry, list)
            and len(retry) == 3
            and all(isinstance(n, int | float) and not isinstance(n, bool) for n in numbers)
            and (r.get("temperature") is None or isinstance(r.get("temperature"), int | float))
        ):
            raise errors.ModelRequestError("the key holder got a malformed provider request.")
        if url is not None and url not in self.allowed:
            raise errors.ModelRequestError(
                f"the model URL {url[:200]!r} was not named on the command line or in "
                f"{BASE_URL_ENV[provider]}; the key is sent only to those (pass --base-url)."
            )
        p = sdk_provider(
            f"{provider}:{model}",
            base_url=url,
            timeout_s=float(r["timeout_s"]),
            max_tokens=int(r["max_tokens"]),
            temperature=r.get("temperature"),
            retry=RetryPolicy(int(retry[0]), float(retry[1]), float(retry[2])),
            env=self.environ,
        )
        self.providers.append(p)
        return {"handle": len(self.providers) - 1, "base_url": p.base_url}


def _undumpable() -> None:
    """PR_SET_DUMPABLE 0: /proc/PID/{environ,mem} and ptrace closed to the user's other
    processes (root keeps CAP_SYS_PTRACE)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def serve(fd: int, environ: dict[str, str]) -> None:
    """Answer requests on `fd` until the loop closes its end."""
    conn = socket.socket(fileno=fd)
    holder = _Holder(environ)
    buf = bytearray()
    while True:
        while b"\n" not in buf:
            chunk = conn.recv(1 << 16)
            if not chunk or len(buf) > MAX_LINE:
                return
            buf += chunk
        line, _, rest = bytes(buf).partition(b"\n")
        buf = bytearray(rest)
        try:
            answer = {"ok": holder.answer(json.loads(line))}
        except KernelloopError as e:
            answer = {"error": {"kind": type(e).__name__, "message": _scrub(str(e), environ)}}
        except Exception as e:  # noqa: BLE001 - anything else is said, never a crash
            message = f"the key holder failed ({type(e).__name__}: {e})"
            answer = {"error": {"kind": "KernelloopError", "message": _scrub(message, environ)}}
        conn.sendall(json.dumps(answer).encode() + b"\n")


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the loop ends it by closing the socket
    _undumpable()
    environ = dict(os.environ)
    try:
        serve(int(sys.argv[1]), environ)
    except OSError:  # the loop ended mid-answer: nothing left to serve
        pass


if __name__ == "__main__":
    main()
