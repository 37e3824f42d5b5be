"""What can go wrong between kernelloop and a model service, as errors a user can act on.

All are `KernelloopError`s (one sentence with the fix, exit 2 from the CLI). The loop may
catch `ModelAnswerError` to count a wasted round instead of ending the run.
"""

from __future__ import annotations

from kernelloop.errors import KernelloopError


class MissingKeyError(KernelloopError):
    """No API key in the environment for a provider that needs one."""


class ModelRequestError(KernelloopError):
    """The service refused the request for a reason retrying will not fix (401, 400, 404...)."""


class ModelUnavailableError(KernelloopError):
    """Transient failures (429, 5xx, timeouts) outlasted the retry budget."""


class ModelAnswerError(KernelloopError):
    """The model answered twice in a form kernelloop cannot turn into a candidate."""


class PromptTemplateError(KernelloopError):
    """A prompt template file is missing or uses an unknown placeholder."""


class PriceTableError(KernelloopError):
    """The price table file is unreadable or has a wrong field."""


class AgentSpecError(KernelloopError):
    """An `--agent` / `--screen-model` / `--final-model` value kernelloop cannot resolve."""


class TransientModelError(Exception):
    """One failed attempt that is worth retrying; raised by providers, consumed by `retry`.

    Not a KernelloopError: it never reaches the user unless the retries run out, and then
    it is wrapped in `ModelUnavailableError`.
    """

    def __init__(self, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s
