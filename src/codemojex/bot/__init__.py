"""The Telegram bot: players play Codemojex in Telegram, through the queue.

ingress     updates → ``cm.commands`` (serial lane per chat, id derived from update_id)
webhook     the aiohttp webhook (secret header checked in constant time) ─┐ both feed
polling     long polling with ``getUpdates`` ──────────────────────────────┘ the ingress
commands    the command consumer: runs a command, admits replies onto ``cm.notify``
telegram    the Telegram Delivery (aiogram ``Bot`` as a client), classifying each send
ratebudget  the notify queue's rate limits: Telegram's 30/s overall, 1/s per chat (EchoMQ's claim gate)
standin     a local Bot API stand-in for tests and the demo (loopback only)
runtime     ``BotApp``: the game's tree plus the bot's children; ``BotApp.run`` is the one
            way to run the bot (every entry point and test goes through it)
upkeep      the loop that starts or resumes the series, keeps the budget set, runs the duties
announce    one score notice and one result per player per round
roundclock  the round answer and the score notice written again as they are sent, on the
            server's clock (never "open for 0s", never "results at the close" after it)
admin       the operators' commands; metrics: the game's Prometheus metrics
catalogue   every text, in English and Spanish
inbound replies     pure parsing, texts and keyboards (every read and write goes through
                    :mod:`codemojex.service`)

Importing this package starts nothing and reads no environment.
"""

from codemojex.bot.commands import CommandWorker
from codemojex.bot.inbound import Inbound, from_update, parse_command, update_job_id
from codemojex.bot.ingress import COMMANDS_QUEUE, Ingress, commands_queue
from codemojex.bot.polling import Poller
from codemojex.bot.ratebudget import BudgetOptions, apply_budget
from codemojex.bot.runtime import BotApp, BotSettings, ensure_rounds
from codemojex.bot.standin import StandIn
from codemojex.bot.telegram import BotState, TelegramDelivery, make_bot
from codemojex.bot.upkeep import Upkeep
from codemojex.bot.webhook import WebhookServer, webhook_app

__all__ = [
    "COMMANDS_QUEUE",
    "BotApp",
    "BotSettings",
    "BotState",
    "BudgetOptions",
    "CommandWorker",
    "Inbound",
    "Ingress",
    "Poller",
    "StandIn",
    "TelegramDelivery",
    "Upkeep",
    "WebhookServer",
    "apply_budget",
    "commands_queue",
    "ensure_rounds",
    "from_update",
    "make_bot",
    "parse_command",
    "update_job_id",
    "webhook_app",
]
