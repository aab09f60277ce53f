"""Runtime errors: one tree, and the one table that maps it to HTTP statuses.

RuntimeEngineError
├── UnknownAdapterError (KeyError)        load of a name the episode's library does not hold
├── AdapterAlreadyActiveError (ValueError) load while another adapter is active
├── NoActiveAdapterError (ValueError)     offload with none active
├── PolicyViolationError (ValueError)     a load the episode's policy forbids
├── AdapterLoadError (ValueError)         an adapter that does not fit or fails verification
├── AuditMismatchError (ValueError)       resident weights differ from their expected roots
│   └── BackboneMismatchError             a node on another backbone than its channel
├── BackboneLoadError (ValueError)        a backbone directory or GGUF file that cannot be loaded
├── InvalidTokensError (ValueError)       token ids outside the vocabulary, nothing to decode from
├── NodeOptionsError (ValueError)         options that cannot make a node (a usage error, exit 2)
├── SessionClosedError (RuntimeError)     use of an engine session after close()
├── ConstrainedChoiceUnsupportedError (NotImplementedError) an engine that cannot constrain
│                                         decoding, asked for the constrained soft policy
├── InvalidPolicyError (ValueError)       a policy that cannot be built (kind, order, guesses)
│   └── UnrunnableEpisodeError            a hard order naming a capability the library lacks
├── EpisodeNotFoundError (KeyError)       an episode id the node does not know (or not yours)
├── TooManyEpisodesError (RuntimeError)   every episode slot is taken by a running episode
├── HandleError (PermissionError)         an MCP episode handle that opens nothing for the caller
│   ├── UnknownHandleError                unknown or expired handle
│   └── ForeignHandleError                a handle opened with other credentials
├── ToolConflictError (ValueError)        two tool servers (or one and the runtime) share a name
├── ToolArgumentError (ValueError)        tool-call arguments that do not fit the tool's schema
└── VllmRequestError (RuntimeError)       vLLM refused or failed a request

`HTTP_STATUS` is the node server's only mapping from these errors to `(status, code)`;
`http_status(exc)` walks it most specific first and falls back to `(400, "bad_request")`.
"""

from __future__ import annotations

from collections.abc import Sequence


class RuntimeEngineError(Exception):
    """Base of every runtime error."""


class UnknownAdapterError(RuntimeEngineError, KeyError):
    def __init__(self, name: str, available: list[str]) -> None:
        self.name = name
        self.available = available
        super().__init__(
            f"capability {name!r} is unavailable (not in this episode's library); "
            f"available: {', '.join(available) or '(none)'}"
        )

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class AdapterAlreadyActiveError(RuntimeEngineError, ValueError):
    def __init__(self, active: str, requested: str) -> None:
        self.active = active
        self.requested = requested
        super().__init__(
            f"adapter {active!r} is active; call offload_lora before loading {requested!r}"
        )


class NoActiveAdapterError(RuntimeEngineError, ValueError):
    def __init__(self) -> None:
        super().__init__("no adapter is active; nothing to offload")


class PolicyViolationError(RuntimeEngineError, ValueError):
    """A load that the episode's policy (e.g. the hard order) does not allow."""


class AdapterLoadError(RuntimeEngineError, ValueError):
    """An adapter that cannot be made resident: bad files, shapes, or a digest mismatch.

    `problems` lists each problem (the message joins them): for the PEFT engine, the format
    problems of `storage.lora` prefixed by the adapter's name and directory.
    """

    def __init__(self, message: str, problems: Sequence[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems) if problems is not None else [message]


class AuditMismatchError(RuntimeEngineError, ValueError):
    """Resident weights whose recomputed manifest root differs from the expected one."""


class BackboneMismatchError(AuditMismatchError):
    """A node whose backbone is not its channel's: the message names both roots (one
    line); `details` says more (which directory, which registered backbone)."""

    def __init__(self, message: str, details: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.details = list(details)


class BackboneLoadError(RuntimeEngineError, ValueError):
    """A backbone directory or GGUF file that cannot be loaded."""


class InvalidTokensError(RuntimeEngineError, ValueError):
    """Token ids outside the vocabulary, or a generate call with an empty history."""


class NodeOptionsError(RuntimeEngineError, ValueError):
    """Options that cannot make a node: a backbone that is not a directory, no adapters, a
    policy that does not fit the library, an engine that cannot follow a channel. `option`
    names the option at fault (None: the options together); `weact runtime` shows it as a
    usage error."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class SessionClosedError(RuntimeEngineError, RuntimeError):
    """An engine session used after `close()`."""


class ConstrainedChoiceUnsupportedError(RuntimeEngineError, NotImplementedError):
    """The engine cannot decode under a constraint (the constrained soft policy needs it)."""

    def __init__(self, engine: str) -> None:
        super().__init__(f"{engine} cannot decode a constrained choice")


class InvalidPolicyError(RuntimeEngineError, ValueError):
    """A policy that cannot be built: unknown kind, empty order, unknown capabilities."""


class UnrunnableEpisodeError(InvalidPolicyError):
    """An episode refused before it starts: its hard order names a capability that the
    library it would be pinned to has no adapter for (a revoke took it out, say)."""

    def __init__(self, order: Sequence[str], missing: Sequence[str], revision: int | None):
        self.missing = list(missing)
        where = f"revision {revision}'s library" if revision is not None else "the library"
        super().__init__(
            f"cannot run this episode: the hard order {' -> '.join(order)} names "
            f"{', '.join(missing)}, which {where} has no adapter for"
        )


class EpisodeNotFoundError(RuntimeEngineError, KeyError):
    def __init__(self, episode_id: str) -> None:
        super().__init__(f"no episode {episode_id!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class TooManyEpisodesError(RuntimeEngineError, RuntimeError):
    """Every episode slot is taken by a running episode."""


class HandleError(RuntimeEngineError, PermissionError):
    """An episode handle that does not open an episode for the caller."""


class UnknownHandleError(HandleError):
    def __init__(self) -> None:
        super().__init__(
            "unknown or expired episode handle: call open_episode for a new episode and pass "
            "the handle it returns as the `episode` argument"
        )


class ForeignHandleError(HandleError):
    def __init__(self) -> None:
        super().__init__("this episode handle was opened with other credentials; refused")


class ToolConflictError(RuntimeEngineError, ValueError):
    """An external tool server offers a name that is already taken."""


class ToolArgumentError(RuntimeEngineError, ValueError):
    """Arguments of a tool call that do not fit its schema."""


class VllmRequestError(RuntimeEngineError, RuntimeError):
    """vLLM refused or failed a request (engine dead, bad request)."""


# error -> (HTTP status, error code) on the node's API, most specific first; any other
# runtime error is the client's mistake (DEFAULT_HTTP_STATUS)
HTTP_STATUS: dict[type[RuntimeEngineError], tuple[int, str]] = {
    EpisodeNotFoundError: (404, "not_found"),
    UnrunnableEpisodeError: (409, "cannot_run"),
    InvalidPolicyError: (422, "invalid"),
    ConstrainedChoiceUnsupportedError: (422, "invalid"),
    TooManyEpisodesError: (503, "busy"),
}
DEFAULT_HTTP_STATUS = (400, "bad_request")


def http_status(exc: BaseException) -> tuple[int, str]:
    """The node API's `(status, code)` for a runtime error (400 "bad_request" otherwise)."""
    for error_type, status in HTTP_STATUS.items():
        if isinstance(exc, error_type):
            return status
    return DEFAULT_HTTP_STATUS
