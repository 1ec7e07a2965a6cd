"""The command handler re-run on the same job (at-least-once): one charge, one set of replies."""

from __future__ import annotations

from codemojex.bot import CommandWorker, Inbound, commands_queue
from codemojex.bot.inbound import encode_inbound, update_job_id
from codemojex.service import Admitted, Services, derive_id, submit
from codemojex.service.codec import decode_note
from codemojex.wallet import balance
from echomq.core import ids
from tests.codemojex.botkit import user_id
from tests.codemojex.game import PRICE, make_player, make_round


async def test_a_command_job_run_twice_charges_once_and_replies_once(services: Services) -> None:
    await make_round(services.pool)
    chat = user_id()
    queue = commands_queue(services)
    worker = CommandWorker(services, start_coins=3 * PRICE)
    for n, text in enumerate(["/start", "😀 😎 🤖 👻 🐱 🐶", "/quick"]):
        job = update_job_id(1, 10 + n)
        await queue.admit(job, encode_inbound(Inbound(10 + n, chat, chat, "Ada", text)), lane=str(chat),
                          serial=True)
        (lease,) = await queue.claim(1, lease_ms=10_000)
        await worker.handle(lease)
        await worker.handle(lease)  # the re-delivery after a crash before the ack
        await queue.complete(lease)  # frees the chat's serial lane for its next command
    assert await balance(services.pool, f"tg:{chat}") == PRICE  # 30 granted once, two guesses charged once
    notes = await services.notifications.browse("pending", limit=100)
    texts = [decode_note(n.row["payload"]).text for n in notes]
    assert len(texts) == 4  # welcome, round, accepted, accepted (quick pick): each once
    assert sum("accepted" in t for t in texts) == 2


async def test_submit_with_a_guess_id_charges_once(services: Services) -> None:
    rid = await make_round(services.pool)
    player = await make_player(services.pool, 2 * PRICE)
    gid = derive_id("JOB", "guess", ids.generate("JOB"))
    first = await submit(services, rid, player, "😀😎🤖👻🐱🐶", guess_id=gid)
    again = await submit(services, rid, player, "😀😎🤖👻🐱🐶", guess_id=gid)
    assert isinstance(first, Admitted) and isinstance(again, Admitted)
    assert first.job_id == again.job_id == gid and again.balance == PRICE
    # The repeat finds the guess's outbox row still waiting (no relay runs here), so it
    # admits the job again: a DUPLICATE on the queue, one job, charged once.
    assert first.queued and again.queued
    assert await balance(services.pool, player) == PRICE
    assert (await services.scores.stats()).total == 1
