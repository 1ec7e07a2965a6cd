"""A TLS front for a real Valkey, for the connector's TLS path (``rediss://``).

The embedded server is built without TLS support ("Missing implement of connection
type tls"), so the test terminates TLS in front of it: a real TLS handshake and
record layer on the client's side (redis-py's ``SSLConnection``), the real server
behind, bytes passed through unchanged. The certificate is a fresh self-signed one for
``127.0.0.1`` made by ``openssl``; the client verifies it against itself as its CA.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit


def self_signed(folder: Path) -> tuple[Path, Path]:
    """``(certificate, key)`` for 127.0.0.1, valid for a day."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True)
    return cert, key


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


@contextlib.contextmanager
def tls_front(backend_url: str, cert: Path, key: Path) -> Iterator[str]:
    """Serve TLS (``cert``, ``key``) on a free loopback port in front of ``backend_url``;
    yields the ``rediss://`` URL (trusting ``cert`` as its CA) for the life of the block."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    target = urlsplit(backend_url)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port: list[int] = []
    stop = asyncio.Event()  # made before the loop runs; set from the test's thread

    sessions: set[asyncio.Task[None]] = set()

    async def session(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        sr, sw = await asyncio.open_connection(target.hostname, target.port)
        try:
            await asyncio.gather(_pipe(cr, sw), _pipe(sr, cw))
        finally:
            sw.close()
            cw.close()

    def handle(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(session(cr, cw))
        sessions.add(task)
        task.add_done_callback(sessions.discard)

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        async with server:
            await stop.wait()
            server.close()
            for task in list(sessions):
                task.cancel()
            await asyncio.gather(*sessions, return_exceptions=True)

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10), "the TLS front did not start"
    try:
        yield f"rediss://127.0.0.1:{port[0]}?ssl_ca_certs={cert}"
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()
