"""A TCP proxy on loopback that loses one reply on purpose: the resend tests' wire fault.

:class:`ReplyDrop` passes bytes both ways between a client and a real Valkey. Armed with
:meth:`ReplyDrop.drop_reply_to` (a marker, such as a job id), it forwards the next
request that carries the marker to the server, waits for the server's reply (so the
call has run), and closes the client's connection instead of passing the reply on:
the client sees a broken connection after the server acted, exactly a reply lost on
the wire, and resends. The proxy runs its own event loop in a thread, so blocking and
asyncio clients can use it alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from types import TracebackType


class ReplyDrop:
    """A proxy in front of ``(host, port)``; ``with ReplyDrop(...) as proxy: proxy.port``."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self.dropped = 0  # replies swallowed so far
        self._marker: bytes | None = None
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="reply-drop", daemon=True)
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()  # every socket open, both sides

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def drop_reply_to(self, marker: bytes) -> None:
        """Lose the reply to the next request that carries ``marker`` (once)."""
        with self._lock:
            self._marker = marker

    @property
    def armed(self) -> bool:
        with self._lock:
            return self._marker is not None

    def _take(self, data: bytes) -> bool:
        with self._lock:
            if self._marker is not None and self._marker in data:
                self._marker = None
                return True
            return False

    def __enter__(self) -> ReplyDrop:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _serve(self) -> None:
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        sessions: set[asyncio.Task[None]] = set()

        def accept(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
            self._writers.add(cw)
            task = asyncio.ensure_future(self._session(cr, cw))
            sessions.add(task)
            task.add_done_callback(sessions.discard)

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
        for task in list(sessions):
            task.cancel()
        await asyncio.gather(*sessions, return_exceptions=True)
        for writer in self._writers:  # a session's own close can be cut short (below)
            writer.close()

    async def _session(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        sw: asyncio.StreamWriter | None = None
        # Whatever ends the session (EOF, a lost reply, a reset, the proxy's stop while it
        # connects upstream), both sockets close, both closes before any wait; and the proxy
        # keeps every writer until its stop and closes them all then. The unclosed-
        # StreamWriter warning test_resend_verdicts raised about 1 run in 10 was an upstream
        # writer born in this ``open_connection`` (traced); the likeliest path is a session
        # ended inside its first ``wait_closed``, before the second writer's close.
        try:
            try:
                sr, sw = await asyncio.open_connection(*self.target)
                self._writers.add(sw)
            except OSError:
                return
            await self._pump(cr, cw, sr, sw)
        finally:
            writers = [w for w in (cw, sw) if w is not None]
            for writer in writers:
                writer.close()
            for writer in writers:
                with contextlib.suppress(Exception):
                    await writer.wait_closed()

    async def _pump(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter,
                    sr: asyncio.StreamReader, sw: asyncio.StreamWriter) -> None:
        lose = asyncio.Event()  # a marked request went up: its reply must not come down

        async def up() -> None:
            while data := await cr.read(1 << 16):
                if self._take(data):
                    lose.set()
                sw.write(data)
                await sw.drain()

        async def down() -> None:
            while data := await sr.read(1 << 16):
                if lose.is_set():  # the server answered the marked call: lose it
                    self.dropped += 1
                    return
                cw.write(data)
                await cw.drain()

        pumps = [asyncio.ensure_future(up()), asyncio.ensure_future(down())]
        try:  # one side ended: the session ends
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
