"""The webhook: the secret header is required (403 and nothing admitted without it), an
update delivered twice is processed once, and the endpoint only admits."""

from __future__ import annotations

from codemojex.bot import BotApp, StandIn
from codemojex.service import Services
from tests.codemojex.botkit import running_bot, until, user_id
from tests.codemojex.game import eventually, make_round

SECRET = "s3cret_Token-1"
HOOK = "http://127.0.0.1/telegram/webhook"  # what setWebhook is told; the test posts to the local URL


async def _listening(app: BotApp) -> str:
    assert app.webhook is not None
    await until(app.webhook.listening.is_set, what="the webhook to listen")
    return app.webhook.url


async def test_a_webhook_without_the_right_secret_is_refused_and_admits_nothing(services: Services) -> None:
    async with StandIn() as api, running_bot(services, api, mode="webhook", webhook_url=HOOK,
                                             secret=SECRET, listen_port=0) as app:
        url = await _listening(app)
        await until(lambda: bool(api.webhook), what="setWebhook")
        assert api.webhook["url"] == HOOK and api.webhook["secret_token"] == SECRET
        update = api.message_update(user_id(), "/help")
        assert await api.post_update(update, url=url, secret="") == 403  # no header at all
        assert await api.post_update(update, url=url, secret="wrong") == 403
        assert await api.post_update(update, url=url, secret=SECRET + "x") == 403
        assert await api.post_update(update, url=url, secret=SECRET[:-1]) == 403
        assert (await app.ingress.queue.stats()).total == 0
        assert app.ingress.admitted == app.ingress.duplicates == 0


async def test_the_same_update_delivered_twice_is_processed_once(services: Services) -> None:
    await make_round(services.pool)
    chat = user_id()
    async with StandIn() as api, running_bot(services, api, mode="webhook", webhook_url=HOOK,
                                             secret=SECRET, listen_port=0) as app:
        url = await _listening(app)
        update = api.message_update(chat, "/start")
        assert await api.post_update(update, url=url, secret=SECRET) == 200
        assert await api.post_update(update, url=url, secret=SECRET) == 200  # Telegram's redelivery
        await until(lambda: len(api.texts(chat)) == 2, what="the welcome and the round")
        again = api.message_update(chat, "/balance")
        assert await api.post_update(again, url=url, secret=SECRET) == 200
        await until(lambda: len(api.texts(chat)) == 3, what="the balance")
        assert await api.post_update(update, url=url, secret=SECRET) == 200  # late redelivery
        assert app.ingress.admitted == 2 and app.ingress.duplicates == 2
        async def both_done() -> bool:  # a reply is sent before its update's job is acknowledged
            return (await app.ingress.queue.stats()).done >= 2

        await eventually(both_done, what="both updates acknowledged")
        stats = await app.ingress.queue.stats()
        assert stats.total == stats.done == 2
        texts = api.texts(chat)
        assert "starting coins" in texts[0] and "is open" in texts[1] and "balance: 100" in texts[2]
        assert len(api.requests) == 3  # each reply once


async def test_a_body_that_is_not_json_is_refused(services: Services) -> None:
    import aiohttp

    async with StandIn() as api, running_bot(services, api, mode="webhook", webhook_url=HOOK,
                                             secret=SECRET, listen_port=0) as app:
        url = await _listening(app)
        async with aiohttp.ClientSession() as session, session.post(
                url, data=b"{not json", headers={"X-Telegram-Bot-Api-Secret-Token": SECRET}) as resp:
            assert resp.status == 400
        ignored = {"update_id": 5, "edited_message": {"text": "x"}}
        assert await api.post_update(ignored, url=url, secret=SECRET) == 200
        assert app.ingress.ignored == 1 and (await app.ingress.queue.stats()).total == 0
