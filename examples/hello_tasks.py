# hello_tasks.py: `echomq worker hello_tasks:app` runs the task; `python hello_tasks.py` admits one
import asyncio
import os
from dataclasses import dataclass

import echomq

app = echomq.App(url=os.environ.get("ECHOMQ_URL", "redis://127.0.0.1:6379"))


@dataclass
class Invoice:
    order: str
    total_cents: int


@app.task(queue="invoices", key="order", max_attempts=5, retry_on=ConnectionError)
async def bill(order: str, cents: list[int]) -> Invoice:
    return Invoice(order=order, total_cents=sum(cents))  # at-least-once: keep it idempotent


async def main() -> None:
    handle = await bill.admit("order-42", [1999, 500])  # checked against the hints, then admitted
    print(handle.verdict)  # Verdict.ENQUEUED; run it again: Verdict.DUPLICATE (key= holds the key an hour)
    print(await handle.result(timeout=30))  # Invoice(order='order-42', total_cents=2499)
    await app.aclose()


if __name__ == "__main__":
    asyncio.run(main())
