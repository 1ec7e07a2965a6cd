"""The cache tier: the game and emoji-set tables in Valkey, read before PostgreSQL.

* **Best effort.** :meth:`CacheTable.put` never raises and never waits: it queues
  the value for the table's writer task and returns. A Valkey error, a full
  queue or a table that is restarting drops the write (counted in ``dropped``);
  the writer of a game or a set never fails because of the cache. Readers
  (:meth:`CacheTable.get`) answer None when the cache cannot.
* **Whole values.** Each value is a hash built in a shadow key
  ``cm:cache:{<table>:<key>}:shadow:<token>`` (one small script builds it whole,
  with its TTL: :data:`SHADOW`, ``lua/cache_shadow.lua``) and swapped in with one ``RENAME``
  onto ``cm:cache:{<table>:<key>}``. Both keys share one hash tag, so the rename
  is legal on a cluster, and a reader sees the old complete value or the new
  complete value, never a mix. The shadow carries the entry's TTL (``RENAME``
  keeps it), so a writer that dies before the swap leaks nothing for long, and
  a unique token per write keeps concurrent writers of one key apart.
* **Supervision.** :meth:`CacheTier.supervisor` is a ``rest_for_one`` tree: the
  directory first, then the two tables. A directory restart restarts the tables
  after it, and they register again, so no table points at a dead directory.
* **Both topologies.** The tier talks to Valkey through the connector only
  (``eval`` and ``command``, inside EchoMQ's exception edge: only
  :class:`~echomq.EchoMQError` reaches this module), so it runs on one server and on
  a cluster alike.
* **Read first, PostgreSQL the truth.** :meth:`CacheTier.round` and
  :meth:`CacheTier.current_round` answer from Valkey and fall back to the wallet on a
  miss, a Valkey error or a malformed entry (and queue the row they read, so the
  next read hits). The scorer reads a round's secret this way, the bot the round
  being played; ``tests/codemojex/test_cache_reads.py`` counts the PostgreSQL
  transactions a guess saves. A round is cached whole (secret included: the scorer
  needs it while the round is open; players reach Valkey only through the bot, which
  never shows an open round's secret).
* **A cached secret is checked.** :meth:`CacheTier.verified_round` (the scorer's read)
  compares the cached secret's hash with the hash the round's row keeps in PostgreSQL
  (``secret_hash``, computed by the server), read once per round per process and kept in
  memory (never in Valkey). A secret that does not match is refused: logged, counted in
  ``refused``, and the round is read from PostgreSQL (and written back to the cache).
* The ``current`` entry is the last round opened; a reader takes it only while it is
  open by the clock, else asks PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime

from psycopg_pool import AsyncConnectionPool

from codemojex.domain.emoji import EmojiSet
from codemojex.domain.errors import ConfigurationError
from codemojex.domain.scoring import secret_hash
from codemojex.service.scripts import game_script
from codemojex.wallet import Round, get_round
from codemojex.wallet import reads as db_reads
from codemojex.wallet.reads import current_round as current_round_in_db
from echomq import (
    AsyncClusterConnector,
    AsyncConnector,
    ChildSpec,
    EchoMQError,
    Script,
    Supervisor,
)

__all__ = ["CURRENT", "DIRECTORY_KEY", "SHADOW", "CacheTable", "CacheTier", "Directory", "ReadStats"]

log = logging.getLogger("codemojex.service.cache")

DIRECTORY_KEY = "cm:cache:directory"
DEFAULT_TTL_S = 24 * 3600  # a cache entry outlives any round; the database stays the truth
MAX_HASHES = 10_000  # secret hashes kept in memory (one per round); past it they are read again
CURRENT = "current"  # the games table's entry for the round opened last

SHADOW: Script = game_script("cache_shadow")


class Directory:
    """Knows which tables are live. Each :meth:`run` is a new generation; tables
    register with the current one (in memory and in ``cm:cache:directory``)."""

    def __init__(self, connector: AsyncConnector | AsyncClusterConnector) -> None:
        self.connector = connector
        self.generation = 0
        self.tables: dict[str, int] = {}
        self._stop = asyncio.Event()

    async def run(self) -> None:
        self._stop.clear()
        self.generation += 1
        self.tables.clear()
        await self._stop.wait()

    def stop(self) -> None:
        self._stop.set()

    async def register(self, name: str) -> None:
        self.tables[name] = self.generation
        with contextlib.suppress(EchoMQError):  # best effort: the in-memory registry is authoritative
            await self.connector.command("HSET", DIRECTORY_KEY, name, str(self.generation))


class CacheTable:
    """One table: ``put`` queues a whole value, the :meth:`run` task writes it."""

    def __init__(self, name: str, directory: Directory, *, ttl_s: int = DEFAULT_TTL_S,
                 max_queued: int = 10_000, suffix: str = "") -> None:
        self.name = name
        self.suffix = suffix  # keeps a test's tables apart on a shared server; "" in the game
        self.directory = directory
        self.ttl_s = ttl_s
        self.written = 0
        self.dropped = 0
        self._queue: asyncio.Queue[tuple[str, dict[str, str]]] = asyncio.Queue(max_queued)
        self.running = False

    def key(self, key: str) -> str:
        return f"cm:cache{self.suffix}:{{{self.name}:{key}}}"

    def put(self, key: str, fields: Mapping[str, object]) -> None:
        """Queue ``fields`` as the whole new value of ``key``. Never raises, never waits."""
        try:
            if "{" in key or "}" in key or not fields:
                raise ConfigurationError(f"bad cache key or empty value: {key!r}")
            self._queue.put_nowait((key, {str(k): str(v) for k, v in fields.items()}))
        except Exception as exc:
            self.dropped += 1
            log.debug("cache %s: dropped a write of %r (%r)", self.name, key, exc)

    async def write(self, key: str, fields: Mapping[str, str]) -> bool:
        """Replace the whole value of ``key`` now (shadow + one RENAME); False on any failure."""
        live = self.key(key)
        shadow = f"{live}:shadow:{secrets.token_hex(8)}"
        flat = [x for pair in fields.items() for x in pair]
        try:
            # The shadow is built whole, with its TTL, in one script call (so a writer that
            # dies leaves at most an expiring shadow), then swapped in by one RENAME.
            await self.directory.connector.eval(SHADOW, [shadow], [self.ttl_s * 1000, *flat])
            await self.directory.connector.command("RENAME", shadow, live)
        except EchoMQError as exc:  # every Valkey failure arrives as one (the connector's edge)
            self.dropped += 1
            log.debug("cache %s: write of %r failed (%r)", self.name, key, exc)
            return False
        self.written += 1
        return True

    async def get(self, key: str) -> dict[str, str] | None:
        """The whole value of ``key``, or None if absent or the cache cannot answer."""
        try:
            row = await self.directory.connector.command("HGETALL", self.key(key))
        except EchoMQError:
            return None
        if not row:
            return None
        return {k.decode(): v.decode() for k, v in row.items()}

    async def run(self) -> None:
        await self.directory.register(self.name)
        self.running = True
        try:
            while True:
                key, fields = await self._queue.get()
                await self.write(key, fields)
        finally:
            self.running = False


class ReadStats:
    """How the tier's reads were answered: from Valkey (``hits``) or PostgreSQL (``misses``)."""

    __slots__ = ("hits", "misses")

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0


class CacheTier:
    """The directory and the ``games`` and ``emoji_sets`` tables; reads with a PostgreSQL fallback."""

    def __init__(self, connector: AsyncConnector | AsyncClusterConnector, *, suffix: str = "") -> None:
        if "{" in suffix or "}" in suffix:
            raise ConfigurationError(f"bad cache suffix {suffix!r}")
        self.directory = Directory(connector)
        self.games = CacheTable("games", self.directory, suffix=suffix)
        self.emoji_sets = CacheTable("emoji_sets", self.directory, suffix=suffix)
        self.reads = ReadStats()
        self.hashes: dict[str, str] = {}  # round id -> its secret's hash, as PostgreSQL keeps it
        self.refused = 0  # cached secrets that did not match their hash

    def trust(self, rnd: Round) -> None:
        """Remember the secret hash of a round read from PostgreSQL."""
        if rnd.secret_hash:
            if len(self.hashes) >= MAX_HASHES:
                self.hashes.clear()
            self.hashes[rnd.id] = rnd.secret_hash

    async def verified_round(self, pool: AsyncConnectionPool, rid: str) -> Round | None:
        """:meth:`round`, its secret checked against the hash PostgreSQL keeps (see the module
        docstring): a cached secret that does not match is refused and PostgreSQL answers."""
        rnd = await self.round(pool, rid)
        if rnd is None or rnd.secret_hash:  # none, or read from PostgreSQL just now
            return rnd
        expected = self.hashes.get(rid)
        if expected is None:
            expected = await db_reads.secret_hash(pool, rid)
            if expected is None:
                return None
            self.hashes[rid] = expected
        if secret_hash(rnd.secret) == expected:
            return rnd
        self.refused += 1
        log.error("cache: round %s's cached secret does not match its hash in PostgreSQL; refused,"
                  " reading PostgreSQL", rid)
        fresh = await get_round(pool, rid)
        if fresh is not None:
            self.trust(fresh)
            self.put_round(fresh)
        return fresh

    async def round(self, pool: AsyncConnectionPool, rid: str) -> Round | None:
        """Round ``rid``: from the cache, else from PostgreSQL (then cached). None: no such round.

        A cached round's ``pot`` is the one at caching time; the secret, set, times and
        price never change, and a reader that needs the state exactly asks the wallet.
        """
        cached = _decode(await self.games.get(rid)) if "{" not in rid and "}" not in rid else None
        if cached is not None:
            self.reads.hits += 1
            return cached
        self.reads.misses += 1
        rnd = await get_round(pool, rid)
        if rnd is not None:
            self.trust(rnd)
            self.put_round(rnd)
        return rnd

    async def current_round(self, pool: AsyncConnectionPool) -> Round | None:
        """The round accepting guesses now: the cached last-opened round while it is open by
        the clock, else PostgreSQL's answer (then cached as the current one)."""
        cached = _decode(await self.games.get(CURRENT))
        now = datetime.now(UTC)
        if cached is not None and cached.state == "open" and cached.opens_at <= now < cached.closes_at:
            self.reads.hits += 1
            return cached
        self.reads.misses += 1
        rnd = await current_round_in_db(pool)
        if rnd is not None:
            self.trust(rnd)
            self.put_round(rnd, current=True)
        return rnd

    def supervisor(self) -> Supervisor:
        return Supervisor(
            [
                ChildSpec("directory", self.directory.run, stop=self.directory.stop, shutdown_s=1.0),
                ChildSpec("games", self.games.run, shutdown_s=1.0),
                ChildSpec("emoji_sets", self.emoji_sets.run, shutdown_s=1.0),
            ],
            strategy="rest_for_one",
            name="cache",
        )

    def put_round(self, rnd: Round, *, current: bool = False) -> None:
        """Queue ``rnd`` whole under its id (and as the ``current`` round if ``current``)."""
        fields: dict[str, object] = {
            "id": rnd.id, "emoji_set": rnd.emoji_set, "opens_at": rnd.opens_at.isoformat(),
            "closes_at": rnd.closes_at.isoformat(), "state": rnd.state, "price": rnd.guess_price,
            "pot": rnd.pot, "secret": " ".join(rnd.secret),
        }
        self.games.put(rnd.id, fields)
        if current:
            self.games.put(CURRENT, fields)

    def put_emoji_set(self, emoji_set: EmojiSet) -> None:
        self.emoji_sets.put(emoji_set.id, {"id": emoji_set.id, "name": emoji_set.name,
                                           "emojis": " ".join(emoji_set.emojis)})


def _decode(fields: dict[str, str] | None) -> Round | None:
    """The round a cache entry holds, or None if there is none or it is not whole."""
    if fields is None:
        return None
    try:
        secret = tuple(fields["secret"].split(" "))
        return Round(fields["id"], fields["emoji_set"], secret, datetime.fromisoformat(fields["opens_at"]),
                     datetime.fromisoformat(fields["closes_at"]), fields["state"], int(fields["price"]),
                     int(fields["pot"]))
    except (KeyError, ValueError):  # an entry written by an older version: ask PostgreSQL
        return None
