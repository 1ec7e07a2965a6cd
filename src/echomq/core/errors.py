"""The one exception root of EchoMQ.

Expected outcomes (a duplicate, a stale attempt, a lost lease) are return
values, never exceptions. Exceptions are for misuse and for failures, and no
exception of the client library (``redis``) ever reaches a caller: the
connectors translate them at one edge (:mod:`echomq.client._edge`), and the error
replies of the Lua scripts through one table (:data:`echomq.protocol.ERROR_CODES`)::

    EchoMQError
    ├── InvalidArgument         (ValueError) a value outside its documented range; nothing sent
    │   ├── InvalidQueueName    a queue name that would break or change the hash tag
    │   ├── InvalidJobId        not a branded id (or not the kind a call needs)
    │   └── InvalidPayload      (also TypeError) a payload that is not bytes
    │       └── PayloadTooLarge a payload over the configured limit
    ├── ScriptContractError     a Lua file without a valid contract header, or a call whose
    │                           KEYS do not line up with its ARGV (EMQKEYS)
    ├── ServerError             the server answered an error no script contract lists
    │   └── BackPressure        the server refuses work for now; nothing was written
    │       ├── ServerBusy      BUSY: a script or module holds the server
    │       └── ServerFull      OOM: maxmemory reached under noeviction
    ├── ServerUnavailable       the server could not be reached within the retry budget
    ├── QueueNotFound           an operator command named a queue the server has never seen
    ├── NotDurable              an admission fewer replicas acknowledged than the queue asks
    ├── QueueNotDrained         a reshard asked of a queue whose shards still hold jobs
    ├── HandlerTimeout          (TimeoutError) a handler ran past its timeout: a failed attempt
    ├── HandlerCrashed          a process-pool handler's process died mid-attempt: a failed attempt
    ├── JobNotFound             (LookupError) no row for the id: never admitted, or gone
    ├── ResultTimeout           (TimeoutError) the job did not end within the wait
    ├── JobFailed               the job is dead: its result is its last error (``.error``)
    ├── JobCancelled            the job was cancelled: it has no result
    ├── JobExpired              the job never started by its deadline (expires_ms): no result
    └── ConfigurationError      the server refuses this client until a person fixes its setup
        └── ProtocolVersionError the queue was written by an incompatible protocol version
            └── ShardCountMismatch a sharded queue built with another shard count
"""

from __future__ import annotations

from echomq.core.failures import parse_failure

__all__ = [
    "BackPressure",
    "ConfigurationError",
    "EchoMQError",
    "HandlerCrashed",
    "HandlerTimeout",
    "InvalidArgument",
    "InvalidJobId",
    "InvalidPayload",
    "InvalidQueueName",
    "JobCancelled",
    "JobExpired",
    "JobFailed",
    "JobNotFound",
    "NotDurable",
    "PayloadTooLarge",
    "ProtocolVersionError",
    "QueueNotDrained",
    "QueueNotFound",
    "ResultTimeout",
    "ScriptContractError",
    "ServerBusy",
    "ServerError",
    "ServerFull",
    "ServerUnavailable",
    "ShardCountMismatch",
]


class EchoMQError(Exception):
    """Root of every error EchoMQ raises on purpose."""


class InvalidArgument(EchoMQError, ValueError):
    """An argument outside its documented range (``echomq.protocol`` lists the ranges).

    Raised before any I/O. The same class answers an ``EMQARG`` reply, the server-side
    check of the same ranges, which also writes nothing.
    """


class InvalidQueueName(InvalidArgument):
    """A queue name that is empty, too long, or holds braces or control characters."""


class InvalidJobId(InvalidArgument):
    """An id that is not a valid branded id."""


class InvalidPayload(InvalidArgument, TypeError):
    """A payload that is not ``bytes`` (``bytearray`` and ``memoryview`` are copied)."""


class PayloadTooLarge(InvalidPayload):
    """A payload longer than the queue's configured limit; nothing was written."""


class ScriptContractError(EchoMQError):
    """A Lua script whose contract header is missing or malformed, or a call with the wrong keys."""


class ConfigurationError(EchoMQError):
    """The server refuses this client for a reason waiting cannot fix: credentials
    (``WRONGPASS``, ``NOAUTH``), ACL permissions (``NOPERM``), the protocol version fence.
    A consumer stops with it; its one-line message names the fix (:mod:`echomq.client.replies`)."""


class ProtocolVersionError(ConfigurationError):
    """The keyspace of a queue records a protocol version this client cannot speak.

    Every script checks it before anything else (docs/decisions/0011), so the refused
    call changed nothing.
    """


class ShardCountMismatch(ProtocolVersionError):
    """A sharded queue's record (``emq:{q}:shards``) names another shard count than the
    client was built with, or one of its shards was retired by a reshard. Checked before
    the client's first call; a retired shard refuses every script (echomq.protocol.sharding)."""


class ServerError(EchoMQError):
    """The server answered an error that no script contract lists as an outcome."""


class BackPressure(ServerError):
    """The server refused the call for now (memory, a busy script); nothing was written.

    Not retried by the connector: the caller decides whether to wait, shed or fail. The
    message says why and, for memory, names the server's ``maxmemory`` and policy.
    """


class ServerBusy(BackPressure):
    """``BUSY``: a long script (or module command) holds the server."""


class ServerFull(BackPressure):
    """``OOM``: the server is at ``maxmemory`` and refuses admissions; workers still drain."""


class ServerUnavailable(EchoMQError):
    """The server stayed unreachable for the whole retry budget."""


class NotDurable(EchoMQError):
    """A durable admission (``QueueOptions.durable_replicas``) that fewer replicas
    acknowledged within ``durable_timeout_ms``. The job *was* written on the primary, so
    it may run, or be lost if that primary fails before its replica catches up: treat it
    as not admitted and resend the same id later (a resend answers DUPLICATE if it held)."""


class QueueNotDrained(EchoMQError):
    """A reshard (drain-and-switch) refused: the old shards still hold pending, active,
    delayed or dead jobs. Nothing was changed; drain them (and requeue or purge the dead)
    and ask again."""


class QueueNotFound(EchoMQError, LookupError):
    """An inspection named a queue that has no keys on the server (a mistyped name)."""


class HandlerTimeout(EchoMQError, TimeoutError):
    """A handler ran past its timeout (``ConsumerOptions.timeout_ms``). Never raised to a
    caller: the consumer records it as the attempt's failure (the row's error names it)
    and gives the lease back at once through the fenced ``retry``."""


class HandlerCrashed(EchoMQError):
    """A process-pool handler's process died during its attempt (a signal such as SIGSEGV
    or SIGKILL, the OOM killer, ``os._exit``). Never raised to a caller: the consumer
    records it as the attempt's failure (the row's error names the signal or exit status)
    and serves on with a fresh process (:mod:`echomq.runtime.process_pool`)."""


class JobNotFound(EchoMQError, LookupError):
    """No row for the job id: it was never admitted, or its finished row was deleted (a
    queue with ``keep_done_ms=0`` keeps no result, retention removed it, or it was purged)."""

    def __init__(self, message: str, *, job_id: str = "") -> None:
        super().__init__(message)
        self.job_id = job_id


class ResultTimeout(EchoMQError, TimeoutError):
    """``result(id, timeout=...)``: the job did not end within the wait (it may still)."""

    def __init__(self, message: str, *, job_id: str = "", state: str = "") -> None:
        super().__init__(message)
        self.job_id, self.state = job_id, state


class JobFailed(EchoMQError):
    """The job is dead: its result is the error its last failed attempt recorded
    (``.error``, the text the row keeps; ``.failures`` how many attempts failed).
    ``.remote_type``, ``.remote_message`` and ``.remote_traceback`` are that text split
    (the handler's exception type name, its message, its traceback; '' where absent)."""

    def __init__(self, message: str, *, job_id: str = "", error: str = "", failures: int = 0) -> None:
        super().__init__(message)
        self.job_id, self.error, self.failures = job_id, error, failures

    @property
    def remote_type(self) -> str:
        return parse_failure(self.error).type

    @property
    def remote_message(self) -> str:
        return parse_failure(self.error).message

    @property
    def remote_traceback(self) -> str:
        return parse_failure(self.error).traceback


class JobCancelled(EchoMQError):
    """The job was cancelled (while waiting, or asked to stop while it ran): no result."""

    def __init__(self, message: str, *, job_id: str = "") -> None:
        super().__init__(message)
        self.job_id = job_id


class JobExpired(EchoMQError):
    """The job was admitted with ``expires_ms`` and did not start by that deadline (server
    clock): it ended ``expired`` and never ran, so it has no result (decision 0045).
    ``.deadline_ms`` is the deadline it missed (server ms; 0 if the row kept none)."""

    def __init__(self, message: str, *, job_id: str = "", deadline_ms: int = 0) -> None:
        super().__init__(message)
        self.job_id, self.deadline_ms = job_id, deadline_ms
