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
    from echomq.client._async.cluster import AsyncClusterConnector
    from echomq.client._async.connect import connect_async
    from echomq.client._async.connector import AsyncConnector
    from echomq.client._async.memory import memory_status as memory_status_async
    from echomq.client._async.queue import AsyncQueue
    from echomq.client._async.reshard import reshard as reshard_async
    from echomq.client._async.scheduler import AsyncScheduler
    from echomq.client._async.sharded import AsyncShardedQueue
    from echomq.client._sync.cluster import ClusterConnector
    from echomq.client._sync.connect import connect
    from echomq.client._sync.connector import Connector
    from echomq.client._sync.memory import memory_status
    from echomq.client._sync.queue import Queue
    from echomq.client._sync.reshard import reshard
    from echomq.client._sync.scheduler import Scheduler
    from echomq.client._sync.sharded import ShardedQueue
    from echomq.client.producer import Producer, ProducerClosed
    from echomq.core import ids as ids  # modules users import through the package, not in __all__
    from echomq.core.backoff import BackoffDelays
    from echomq.core.errors import (
        BackPressure,
        ConfigurationError,
        EchoMQError,
        HandlerCrashed,
        HandlerTimeout,
        InvalidArgument,
        InvalidJobId,
        InvalidPayload,
        InvalidQueueName,
        JobCancelled,
        JobExpired,
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
    from echomq.core.hooks import Hooks
    from echomq.core.ids import derive_id, generate, generate_many, valid
    from echomq.core.memory import MemoryStatus
    from echomq.core.model import (
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
    from echomq.core.outcomes import Ack, Backoff, BackoffPolicy, Defer, Outcome
    from echomq.ops import clikit as clikit
    from echomq.ops import dashboard as dashboard
    from echomq.protocol import Bulk
    from echomq.protocol import keyspace as keyspace
    from echomq.protocol.flows import FlowSpec, StepOptions
    from echomq.protocol.gate import Claimed, Gate, RateLimit
    from echomq.protocol.keyspace import job_key, queue_key, slot
    from echomq.protocol.schedules import Missed, Schedule, tick_of
    from echomq.protocol.scripts import Script
    from echomq.protocol.scripts import parse as parse_script
    from echomq.runtime.consumer import Consumer, ConsumerOptions, ConsumerStats, Handler
    from echomq.runtime.consumer_child import ConsumerChild
    from echomq.runtime.sharded_consumer import ShardedConsumer
    from echomq.runtime.supervisor import ChildSpec, Supervisor, SupervisorGaveUp, run_until_signal
    from echomq.servers.local_cluster import LocalCluster
    from echomq.servers.server import EmbeddedValkey, end_with_parent, server_url_from_env
    from echomq.servers.server import forget as forget_server
    from echomq.servers.server import track as track_server
    from echomq.tasks.app import App
    from echomq.tasks.canvas import Signature, chain, chord, group
    from echomq.tasks.context import TaskContext
    from echomq.tasks.errors import TaskError, UnknownTask, UnreadablePayload
    from echomq.tasks.handle import SyncTaskHandle, TaskHandle
    from echomq.tasks.serializer import MsgspecSerializer, Serializer
    from echomq.tasks.task import Task, TaskCall
    from echomq.tasks.workflows import (
        BatchHandle,
        BatchStatus,
        GroupHandle,
        SyncBatchHandle,
        SyncGroupHandle,
    )
else:
    from echomq._lazy import attach

    __getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "PROTOCOL",
    "Ack",
    "App",
    "AsyncClusterConnector",
    "AsyncConnector",
    "AsyncQueue",
    "AsyncScheduler",
    "AsyncShardedQueue",
    "BackPressure",
    "Backoff",
    "BackoffDelays",
    "BackoffPolicy",
    "BatchHandle",
    "BatchStatus",
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
    "FlowSpec",
    "Gate",
    "GroupHandle",
    "Handler",
    "HandlerCrashed",
    "HandlerTimeout",
    "Hooks",
    "InvalidArgument",
    "InvalidJobId",
    "InvalidPayload",
    "InvalidQueueName",
    "JobCancelled",
    "JobExpired",
    "JobFailed",
    "JobNotFound",
    "JobView",
    "Lease",
    "LocalCluster",
    "MemoryStatus",
    "Missed",
    "MsgspecSerializer",
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
    "Serializer",
    "ServerBusy",
    "ServerError",
    "ServerFull",
    "ServerUnavailable",
    "ShardCountMismatch",
    "ShardedConsumer",
    "ShardedQueue",
    "Signature",
    "Stats",
    "StepOptions",
    "Supervisor",
    "SupervisorGaveUp",
    "SyncBatchHandle",
    "SyncGroupHandle",
    "SyncTaskHandle",
    "Task",
    "TaskCall",
    "TaskContext",
    "TaskError",
    "TaskHandle",
    "UnknownTask",
    "UnreadablePayload",
    "Verdict",
    "chain",
    "chord",
    "connect",
    "connect_async",
    "derive_id",
    "end_with_parent",
    "forget_server",
    "generate",
    "generate_many",
    "group",
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
