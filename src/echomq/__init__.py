"""EchoMQ: a job queue on Valkey where every state transition is one Lua script.

Every key of a queue shares the queue's hash tag, so each script is atomic on one
server and legal on a cluster. Consumers lease jobs on the server clock; the
attempt counter is the fencing token. Both an asyncio API (``AsyncQueue``,
``AsyncConnector``, ``Consumer``) and a blocking one (``Queue``, ``Connector``)
speak the same protocol; ``connect_async``/``connect`` pick a single server or a
cluster (``AsyncClusterConnector``/``ClusterConnector``) from a URL or seed nodes.
``Schedule`` + ``AsyncScheduler``/``Scheduler`` admit one job per tick of a cron
expression or interval, however many schedulers run. ``derive_id`` maps a business
key to the same job id every time (idempotent admission).
"""

from typing import TYPE_CHECKING

# The facade's names, imported on first use (echomq/_lazy.py): the block below is read
# at run time as the table of what comes from where, and only type checkers execute it.
if TYPE_CHECKING:
    from echomq._async.cluster import AsyncClusterConnector
    from echomq._async.connect import connect_async
    from echomq._async.connector import AsyncConnector
    from echomq._async.memory import memory_status as memory_status_async
    from echomq._async.queue import AsyncQueue
    from echomq._async.reshard import reshard as reshard_async
    from echomq._async.scheduler import AsyncScheduler
    from echomq._async.sharded import AsyncShardedQueue
    from echomq._sync.cluster import ClusterConnector
    from echomq._sync.connect import connect
    from echomq._sync.connector import Connector
    from echomq._sync.memory import memory_status
    from echomq._sync.queue import Queue
    from echomq._sync.reshard import reshard
    from echomq._sync.scheduler import Scheduler
    from echomq._sync.sharded import ShardedQueue
    from echomq.consumer import Consumer, ConsumerOptions, ConsumerStats, Handler
    from echomq.consumer_child import ConsumerChild
    from echomq.errors import (
        BackPressure,
        ConfigurationError,
        EchoMQError,
        HandlerTimeout,
        InvalidArgument,
        InvalidJobId,
        InvalidPayload,
        InvalidQueueName,
        JobCancelled,
        JobFailed,
        JobNotFound,
        NotDurable,
        PayloadTooLarge,
        ProtocolVersionError,
        QueueNotDrained,
        QueueNotFound,
        ResultTimeout,
        ScriptContractError,
        ServerBusy,
        ServerError,
        ServerFull,
        ServerUnavailable,
        ShardCountMismatch,
    )
    from echomq.gate import Claimed, Gate, RateLimit
    from echomq.hooks import Hooks
    from echomq.ids import derive_id, generate, generate_many, valid
    from echomq.keyspace import job_key, queue_key, slot
    from echomq.local_cluster import LocalCluster
    from echomq.memory import MemoryStatus
    from echomq.model import (
        PROTOCOL,
        CancelOutcome,
        CancelToken,
        Completion,
        JobView,
        Lease,
        ProgressOutcome,
        QueueOptions,
        RetryOutcome,
        Stats,
        Verdict,
    )
    from echomq.outcomes import Ack, Backoff, BackoffPolicy, Defer, Outcome
    from echomq.producer import Producer, ProducerClosed
    from echomq.protocol import Bulk
    from echomq.schedules import Missed, Schedule, tick_of
    from echomq.scripts import Script
    from echomq.scripts import parse as parse_script
    from echomq.server import EmbeddedValkey, end_with_parent, server_url_from_env
    from echomq.server import forget as forget_server
    from echomq.server import track as track_server
    from echomq.sharded_consumer import ShardedConsumer
    from echomq.supervisor import ChildSpec, Supervisor, SupervisorGaveUp, run_until_signal
else:
    from echomq._lazy import attach

    __getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "PROTOCOL",
    "Ack",
    "AsyncClusterConnector",
    "AsyncConnector",
    "AsyncQueue",
    "AsyncScheduler",
    "AsyncShardedQueue",
    "BackPressure",
    "Backoff",
    "BackoffPolicy",
    "Bulk",
    "CancelOutcome",
    "CancelToken",
    "ChildSpec",
    "Claimed",
    "ClusterConnector",
    "Completion",
    "ConfigurationError",
    "Connector",
    "Consumer",
    "ConsumerChild",
    "ConsumerOptions",
    "ConsumerStats",
    "Defer",
    "EchoMQError",
    "EmbeddedValkey",
    "Gate",
    "Handler",
    "HandlerTimeout",
    "Hooks",
    "InvalidArgument",
    "InvalidJobId",
    "InvalidPayload",
    "InvalidQueueName",
    "JobCancelled",
    "JobFailed",
    "JobNotFound",
    "JobView",
    "Lease",
    "LocalCluster",
    "MemoryStatus",
    "Missed",
    "NotDurable",
    "Outcome",
    "PayloadTooLarge",
    "Producer",
    "ProducerClosed",
    "ProgressOutcome",
    "ProtocolVersionError",
    "Queue",
    "QueueNotDrained",
    "QueueNotFound",
    "QueueOptions",
    "RateLimit",
    "ResultTimeout",
    "RetryOutcome",
    "Schedule",
    "Scheduler",
    "Script",
    "ScriptContractError",
    "ServerBusy",
    "ServerError",
    "ServerFull",
    "ServerUnavailable",
    "ShardCountMismatch",
    "ShardedConsumer",
    "ShardedQueue",
    "Stats",
    "Supervisor",
    "SupervisorGaveUp",
    "Verdict",
    "connect",
    "connect_async",
    "derive_id",
    "end_with_parent",
    "forget_server",
    "generate",
    "generate_many",
    "job_key",
    "memory_status",
    "memory_status_async",
    "parse_script",
    "queue_key",
    "reshard",
    "reshard_async",
    "run_until_signal",
    "server_url_from_env",
    "slot",
    "tick_of",
    "track_server",
    "valid",
]
