"""What a typed task costs the client over the raw API (issue 26, item 8).

    .venv/bin/python bench/typed_tasks.py [--n 200000] [--repeats 5] [--format json|msgpack|both]

Two figures, each the best of ``--repeats`` passes of ``--n`` calls, CPU time of this
process (``time.process_time``), in the same run, no server involved:

* **admission**: building the admission of one job of a task with three small arguments
  (``send(to: str, subject: str, retries: int)``): a raw admit is ``generate("JOB")`` plus
  the queue's own call building (``queue.admission.call``: the checks and the request a
  raw ``admit(id, payload)`` sends); a typed one is ``task.prepare(...)`` (bind, check
  against the hints, encode the envelope, mint the id) plus the same call building. The
  round trip, the same for both, is left out. Target: at most 2 µs more per job.
* **handler**: one call of the worker's handler for that task (open the envelope, decode
  the arguments to their types, call the function, encode its result as the job's result)
  against a raw ``async def handler(lease)`` that returns bytes, both awaited in one event
  loop. Target: at most 3 µs more per call.

Also printed: the payload sizes, and (``--format both``) the same for msgspec's JSON and
MessagePack; ``--codecs`` adds encode + typed decode per library (msgspec JSON and
MessagePack, the standard library's json, pydantic) for two argument lists, the table
docs/decisions/0033-typed-tasks.md quotes.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from echomq import App, AsyncConnector, AsyncQueue, Lease, generate
from echomq.tasks import MsgspecSerializer

TO, SUBJECT, RETRIES = "ada@example.org", "your order shipped", 3


def best(run: Callable[[int], object], n: int, repeats: int) -> float:
    """Microseconds of CPU per call: the best of ``repeats`` passes of ``n``."""
    out = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        run(n)
        out = min(out, time.process_time() - start)
    return out / n * 1e6


def abest(run: Callable[[int], Awaitable[object]], n: int, repeats: int) -> float:
    async def passes() -> float:
        out = float("inf")
        for _ in range(repeats):
            start = time.process_time()
            await run(n)
            out = min(out, time.process_time() - start)
        return out / n * 1e6
    return asyncio.run(passes())


def measure(fmt: str, n: int, repeats: int) -> dict[str, float]:
    conn = AsyncConnector.from_url("redis://127.0.0.1:1")  # never connected: no I/O here
    app = App(connector=conn, queue="bench", serializer=MsgspecSerializer(fmt))

    @app.task()
    async def send(to: str, subject: str, retries: int) -> int:
        return retries

    queue = AsyncQueue(conn, "bench")
    build = queue.admission.call
    raw_payload = b'["ada@example.org","your order shipped",3]'  # what a raw caller encoded
    _, typed_payload, _ = send.prepare((TO, SUBJECT, RETRIES), {})

    def raw_admit(k: int) -> None:
        for _ in range(k):
            build(generate("JOB"), raw_payload, None, 0, False, None)

    def typed_admit(k: int) -> None:
        prepare = send.prepare
        for _ in range(k):
            job_id, payload, lane = prepare((TO, SUBJECT, RETRIES), {})
            build(job_id, payload, lane, 0, False, None)

    lease = Lease("bench", generate("JOB"), 1, typed_payload, None, 0)
    handler: Any = app.handler("bench")

    async def raw(job: Lease) -> bytes:
        return b"3"

    async def raw_calls(k: int) -> None:
        for _ in range(k):
            await raw(lease)

    async def typed_calls(k: int) -> None:
        for _ in range(k):
            await handler(lease)

    figures = {}
    # interleaved, so a drift of the machine's speed meets both alike
    ra, ta, rh, th = [], [], [], []
    for _ in range(repeats):
        ra.append(best(raw_admit, n, 1))
        ta.append(best(typed_admit, n, 1))
        rh.append(abest(raw_calls, n, 1))
        th.append(abest(typed_calls, n, 1))
    figures["raw admit µs"], figures["typed admit µs"] = min(ra), min(ta)
    figures["raw handler µs"], figures["typed handler µs"] = min(rh), min(th)
    figures["payload bytes"] = float(len(typed_payload))
    figures["args bytes"] = float(len(typed_payload) - typed_payload.index(b"\n") - 1)
    return figures


@dataclasses.dataclass
class Line:
    sku: str
    qty: int
    price: float


@dataclasses.dataclass
class Order:
    id: int
    customer: str
    lines: list[Line]


def _order_out(v: Any) -> bytes:
    import json
    return json.dumps([dataclasses.asdict(v[0])]).encode()


def _order_in(b: bytes) -> Any:
    import json
    (o,) = json.loads(b)
    return (Order(o["id"], o["customer"], [Line(**x) for x in o["lines"]]),)


def _small_out(v: Any) -> bytes:
    import json
    return json.dumps(v).encode()


def _small_in(b: bytes) -> Any:
    import json
    return tuple(json.loads(b))  # no type check at all


_std_order = (_order_out, _order_in)
_std_small = (_small_out, _small_in)


def _calls(fn: Callable[[Any], Any], arg: Any) -> Callable[[int], None]:
    """``k`` calls of ``fn(arg)``, nothing kept (a list of results would time the collector)."""
    def run(k: int) -> None:
        for _ in range(k):
            fn(arg)
    return run


def codecs(n: int, repeats: int) -> None:
    """Encode plus typed decode of two argument lists, per library (the decision's table)."""
    small: Any = (TO, SUBJECT, RETRIES)
    order = Order(42, "ada", [Line(f"SKU-{i}", i, 9.5) for i in range(20)])
    cases: list[tuple[str, Any, Any]] = [("3 small args", small, tuple[str, str, int]),
                                         ("order, 20 lines", (order,), tuple[Order])]
    rows = []
    for label, value, typ in cases:
        for fmt in ("json", "msgpack"):
            ser = MsgspecSerializer(fmt)
            dec = ser.decoder(typ)
            data = ser.encode(value)
            rows.append((label, f"msgspec {fmt}", len(data),
                         best(_calls(ser.encode, value), n, repeats), best(_calls(dec, data), n, repeats)))
        # the standard library: dataclasses by hand (asdict out, constructors back)
        enc, dec_std = (_std_order if label.startswith("order") else _std_small)
        data = enc(value)
        rows.append((label, "stdlib json", len(data),
                     best(_calls(enc, value), n, repeats), best(_calls(dec_std, data), n, repeats)))
        try:
            import pydantic
        except ImportError:
            continue
        ta = pydantic.TypeAdapter(typ)
        data = ta.dump_json(value)
        rows.append((label, f"pydantic {pydantic.VERSION} json", len(data),
                     best(_calls(ta.dump_json, value), n, repeats),
                     best(_calls(ta.validate_json, data), n, repeats)))
    print("| arguments | library | bytes | encode µs | typed decode µs |")
    print("|---|---|---|---|---|")
    for label, lib, size, e, d in rows:
        print(f"| {label} | {lib} | {size} | {e:.3f} | {d:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--format", choices=["json", "msgpack", "both"], default="both")
    parser.add_argument("--codecs", action="store_true",
                        help="also time encode + typed decode per library (decision 0033's table)")
    args = parser.parse_args()
    formats = ["json", "msgpack"] if args.format == "both" else [args.format]
    print(f"load average {os.getloadavg()[0]:.2f}; n={args.n}, best of {args.repeats} (interleaved)")
    for fmt in formats:
        f = measure(fmt, args.n, args.repeats)
        admit = f["typed admit µs"] - f["raw admit µs"]
        handle = f["typed handler µs"] - f["raw handler µs"]
        print(f"{fmt:8} admission: raw {f['raw admit µs']:.3f} µs, typed {f['typed admit µs']:.3f} µs,"
              f" +{admit:.3f} µs (target <= 2)  {'met' if admit <= 2 else 'MISSED'}")
        print(f"{fmt:8} handler:   raw {f['raw handler µs']:.3f} µs, typed {f['typed handler µs']:.3f} µs,"
              f" +{handle:.3f} µs (target <= 3)  {'met' if handle <= 3 else 'MISSED'}")
        print(f"{fmt:8} payload {f['payload bytes']:.0f} B (arguments {f['args bytes']:.0f} B)")
    if args.codecs:
        codecs(max(1000, args.n // 10), args.repeats)


if __name__ == "__main__":
    main()
