"""What the service layer runs against: the PostgreSQL pool, the Valkey connector,
the game's queues and (optionally) the cache tier. Built once by the composition
root (:mod:`codemojex.game.app`) and handed to every service and worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg_pool import AsyncConnectionPool

from codemojex.service.charges import Charges
from echomq import AsyncClusterConnector, AsyncConnector, AsyncQueue, AsyncShardedQueue

if TYPE_CHECKING:
    from codemojex.service.cache import CacheTier

__all__ = ["COMMANDS_QUEUE", "NOTIFY_QUEUE", "SCORE_QUEUE", "SETTLE_QUEUE", "Services"]

# The queues and their beat and lease: docs/architecture.md, the supervision tree of the game.

SCORE_QUEUE = "cm"  # one lane per player; scoring (beat 250 ms, lease 10 s)
SETTLE_QUEUE = "cm-settle"  # round open/close jobs, delayed to their time (100 ms / 10 s)
NOTIFY_QUEUE = "cm.notify"  # notifications to players (50 ms / 15 s)
COMMANDS_QUEUE = "cm.commands"  # the bot's inbound commands (100 ms / 10 s; codemojex.bot.ingress)


class Services:
    """The game's handles. Cheap to hold; owns nothing (the caller closes pool and connector).

    ``suffix`` is appended to every queue name (tests use it to keep runs apart on a
    shared server); the game itself runs with the names above, suffix ``""``.
    ``score_shards``: 0 keeps ``cm`` one queue; N spreads it over N shards (one lane per
    player, so a player's guesses stay in order in one shard; docs/capacity.md).
    """

    def __init__(
        self,
        pool: AsyncConnectionPool,
        connector: AsyncConnector | AsyncClusterConnector,
        *,
        cache: CacheTier | None = None,
        suffix: str = "",
        score_shards: int = 0,
    ) -> None:
        self.pool = pool
        self.suffix = suffix
        self.connector = connector
        self.cache = cache
        self.scores: AsyncQueue | AsyncShardedQueue = (
            AsyncShardedQueue(connector, SCORE_QUEUE + suffix, shards=score_shards)
            if score_shards else AsyncQueue(connector, SCORE_QUEUE + suffix))
        self.settlements = AsyncQueue(connector, SETTLE_QUEUE + suffix)
        self.notifications = AsyncQueue(connector, NOTIFY_QUEUE + suffix)
        self.commands = AsyncQueue(connector, COMMANDS_QUEUE + suffix)  # the bot's, when it runs
        self.charges = Charges(pool, self.scores)  # submissions charged in groups
