"""EchoMQ: a job queue on Valkey where every state transition is one Lua script.

Every key of a queue shares the queue's hash tag, so each script is atomic on one
server and legal on a cluster. Consumers lease jobs on the server clock; the
attempt counter is the fencing token. Both an asyncio API (``AsyncQueue``,
``AsyncConnector``, ``Consumer``) and a blocking one (``Queue``, ``Connector``)
speak the same protocol.
"""

from echomq._async.connector import AsyncConnector
from echomq._async.queue import AsyncQueue
from echomq._sync.connector import Connector
from echomq._sync.queue import Queue
from echomq.errors import (
    EchoMQError,
    InvalidJobId,
    InvalidQueueName,
    PayloadTooLarge,
    ProtocolVersionError,
    ScriptContractError,
    ServerError,
    ServerUnavailable,
)
from echomq.ids import generate, valid
from echomq.keyspace import job_key, queue_key, slot
from echomq.model import (
    PROTOCOL,
    Completion,
    JobView,
    Lease,
    QueueOptions,
    RetryOutcome,
    Stats,
    Verdict,
)

__all__ = [
    "PROTOCOL",
    "AsyncConnector",
    "AsyncQueue",
    "Completion",
    "Connector",
    "EchoMQError",
    "InvalidJobId",
    "InvalidQueueName",
    "JobView",
    "Lease",
    "PayloadTooLarge",
    "ProtocolVersionError",
    "Queue",
    "QueueOptions",
    "RetryOutcome",
    "ScriptContractError",
    "ServerError",
    "ServerUnavailable",
    "Stats",
    "Verdict",
    "generate",
    "job_key",
    "queue_key",
    "slot",
    "valid",
]
