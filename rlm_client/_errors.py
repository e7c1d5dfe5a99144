"""The kernel side's one error type: a tool or client failure with the host's stable code."""

from __future__ import annotations


class ClientError(Exception):
    """A memory tool call failed; `code` is the host's stable error code."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
