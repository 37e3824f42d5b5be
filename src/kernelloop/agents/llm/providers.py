"""Model services behind one small interface: OpenAI-compatible chat and Anthropic messages.

Both use the official SDKs with their own retries off (`max_retries=0`); transient
failures are raised as `TransientModelError` and retried by `retry.call_with_retry`, so
the retry behaviour is ours, bounded and tested. Keys come from the environment and live
only inside the SDK client: never in prompts, records, logs or error messages.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kernelloop.agents.llm.errors import (
    AgentSpecError,
    MissingKeyError,
    ModelRequestError,
    TransientModelError,
)
from kernelloop.agents.llm.retry import RetryPolicy, call_with_retry, is_transient_status

PROVIDERS = ("openai", "anthropic")
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
# vLLM, SGLang, llama.cpp and Ollama accept any bearer token unless started with one, and
# vLLM's docs use "EMPTY"; the OpenAI SDK refuses to start without some key.
LOCAL_PLACEHOLDER_KEY = "EMPTY"


@dataclass(frozen=True)
class Usage:
    """Token counts of one call. `input_tokens` is every prompt token, cached or not;
    the cache fields say how many of them were cache reads / cache writes."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class Completion:
    text: str
    usage: Usage
    provider: str
    model: str
    latency_s: float
    attempts: int = 1
    truncated: bool = False


class Provider(Protocol):
    provider: str
    model: str

    def complete(self, system: str, messages: list[dict[str, str]]) -> Completion:
        """One answer to a conversation; retries transient errors; raises KernelloopErrors."""
        ...


def parse_model_spec(spec: str, default_provider: str | None = None) -> tuple[str, str]:
    """'openai:gpt-4o' -> ('openai', 'gpt-4o'); a bare 'gpt-4o' takes `default_provider`."""
    provider, sep, model = spec.partition(":")
    if sep and provider in PROVIDERS and model:
        return provider, model
    # Ollama names carry a tag after a colon ("qwen2.5-coder:7b"): with a provider to
    # inherit, an unknown prefix is part of the model name, not a provider.
    if default_provider in PROVIDERS and spec and provider not in PROVIDERS:
        return default_provider, spec
    raise AgentSpecError(
        f"cannot tell which service runs model {spec!r}; write it as openai:MODEL or "
        "anthropic:MODEL (any OpenAI-compatible server counts as openai)."
    )


def _scrub(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret and len(secret) > 3 else text


def _retry_after_s(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000.0
        if "retry-after" in headers:
            return float(headers["retry-after"])
    except ValueError:  # an HTTP date instead of seconds: fall back to our own backoff
        return None
    return None


class _SdkProvider:
    """Shared plumbing: key and URL resolution, timing, error translation, retries."""

    provider = ""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_tokens: int = 8192,
        temperature: float | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        env: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if env is None else env
        self.model = model
        self.base_url = base_url or env.get(BASE_URL_ENV[self.provider]) or None
        key = api_key or env.get(KEY_ENV[self.provider], "")
        if not key and self.provider == "openai" and self.base_url:
            key = LOCAL_PLACEHOLDER_KEY
        if not key:
            raise MissingKeyError(
                f"model {self.provider}:{model} needs an API key; export "
                f"{KEY_ENV[self.provider]}=... (or use --agent tuner, which needs no model)."
            )
        self._key = key
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._client = self._make_client()

    def __repr__(self) -> str:  # never show the key, e.g. in a traceback or a log line
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"

    def complete(self, system: str, messages: list[dict[str, str]]) -> Completion:
        start = time.monotonic()
        (text, usage, truncated), log = call_with_retry(
            lambda: self._attempt(system, messages),
            self.retry,
            what=f"the call to {self.label}",
            sleep=self._sleep,
        )
        return Completion(
            text=text,
            usage=usage,
            provider=self.provider,
            model=self.model,
            latency_s=time.monotonic() - start,
            attempts=log.attempts,
            truncated=truncated,
        )

    def _attempt(self, system: str, messages: list[dict[str, str]]) -> tuple[str, Usage, bool]:
        sdk = self._sdk()
        try:
            return self._call(system, messages)
        except sdk.APITimeoutError as e:
            raise TransientModelError(f"timed out after {self.timeout_s:g} s") from e
        except sdk.APIConnectionError as e:
            raise TransientModelError(f"connection failed: {_scrub(str(e), self._key)}") from e
        except sdk.APIStatusError as e:
            detail = _scrub(str(e), self._key)[:300]
            if is_transient_status(e.status_code):
                raise TransientModelError(f"HTTP {e.status_code}", _retry_after_s(e)) from e
            fix = {
                401: f"check {KEY_ENV[self.provider]}",
                403: f"check that {KEY_ENV[self.provider]} may use this model",
                404: "check the model name and the base URL (it usually ends in /v1 for "
                "OpenAI-compatible servers)",
            }.get(e.status_code, "check the model name and options")
            raise ModelRequestError(
                f"{self.label} refused the request with HTTP {e.status_code} ({detail}); {fix}."
            ) from e

    def _sdk(self) -> Any:
        raise NotImplementedError

    def _make_client(self) -> Any:
        raise NotImplementedError

    def _call(self, system: str, messages: list[dict[str, str]]) -> tuple[str, Usage, bool]:
        raise NotImplementedError


class OpenAIProvider(_SdkProvider):
    """Chat Completions: OpenAI itself and every OpenAI-compatible server."""

    provider = "openai"
    _token_param = "max_tokens"

    def _sdk(self) -> Any:
        import openai

        return openai

    def _make_client(self) -> Any:
        import openai

        return openai.OpenAI(
            api_key=self._key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0
        )

    def _call(self, system: str, messages: list[dict[str, str]]) -> tuple[str, Usage, bool]:
        import openai

        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, *messages],
            self._token_param: self.max_tokens,
        }
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        try:
            r = self._client.chat.completions.create(**kwargs)
        except openai.BadRequestError as e:
            # OpenAI's reasoning models reject `max_tokens` and name the replacement;
            # most compatible servers only know `max_tokens`. Switch once and remember.
            if self._token_param == "max_tokens" and "max_completion_tokens" in str(e):
                self._token_param = "max_completion_tokens"
                return self._call(system, messages)
            raise
        choice = r.choices[0] if r.choices else None
        text = (choice.message.content or "") if choice else ""
        u = r.usage
        cached = 0
        if u is not None and u.prompt_tokens_details is not None:
            cached = u.prompt_tokens_details.cached_tokens or 0
        usage = Usage(
            input_tokens=(u.prompt_tokens or 0) if u else 0,
            output_tokens=(u.completion_tokens or 0) if u else 0,
            cache_read_tokens=cached,
        )
        return text, usage, bool(choice and choice.finish_reason == "length")


class AnthropicProvider(_SdkProvider):
    """Anthropic Messages API."""

    provider = "anthropic"

    def _sdk(self) -> Any:
        import anthropic

        return anthropic

    def _make_client(self) -> Any:
        import anthropic

        return anthropic.Anthropic(
            api_key=self._key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0
        )

    def _call(self, system: str, messages: list[dict[str, str]]) -> tuple[str, Usage, bool]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": messages,
        }
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        r = self._client.messages.create(**kwargs)
        text = "".join(getattr(b, "text", "") for b in r.content if b.type == "text")
        u = r.usage
        # Anthropic's input_tokens excludes cache reads and writes; add them back so that
        # input_tokens means "all prompt tokens" for both providers.
        read = u.cache_read_input_tokens or 0
        write = u.cache_creation_input_tokens or 0
        usage = Usage(
            input_tokens=u.input_tokens + read + write,
            output_tokens=u.output_tokens,
            cache_read_tokens=read,
            cache_write_tokens=write,
        )
        return text, usage, r.stop_reason == "max_tokens"


def sdk_provider(spec: str, *, default_provider: str | None = None, **options: Any) -> _SdkProvider:
    """A provider on the official SDK from 'openai:MODEL' / 'anthropic:MODEL' (options: see
    _SdkProvider). This process must hold the key: `keyholder.make_provider` decides."""
    provider, model = parse_model_spec(spec, default_provider)
    cls = OpenAIProvider if provider == "openai" else AnthropicProvider
    return cls(model, **options)
