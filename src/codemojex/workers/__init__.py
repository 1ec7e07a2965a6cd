"""The game's consumers, one module per queue, each with its beat and lease
(docs/architecture.md, the supervision tree of the game).

score         ``cm``         beat 250 ms, lease 10 s   score once, lock positions, notify
settle        ``cm-settle``  beat 100 ms, lease 10 s   open rounds, close and settle them
notify        ``cm.notify``  beat 50 ms,  lease 15 s   deliver notifications (console for now)
"""

from codemojex.workers.notify import ConsoleDelivery, Delivered, Delivery, Failed, NotifyWorker, RateLimited
from codemojex.workers.score import ScoreWorker
from codemojex.workers.settle import SettleWorker

__all__ = [
    "ConsoleDelivery",
    "Delivered",
    "Delivery",
    "Failed",
    "NotifyWorker",
    "RateLimited",
    "ScoreWorker",
    "SettleWorker",
]
