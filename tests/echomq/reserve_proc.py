"""A producer killed between the two steps of a laned admission on a sharded queue.

    python -m tests.echomq.reserve_proc URL QUEUE SHARDS ID LANE

It takes the first step of ``ShardedQueue.admit(ID, ..., lane=LANE)`` where the lane's
shard is not the id's home (the reservation in the home shard, decision 0040), prints
``reserved <verdict>``, and then waits to be killed (kill -9) before the second step.
"""

from __future__ import annotations

import sys
import time

from echomq import ShardedQueue, connect
from echomq.protocol.reservations import decode_reservation, reserve


def main() -> None:
    url, name, shards, job_id, lane = sys.argv[1:6]
    conn = connect(url)
    q = ShardedQueue(conn, name, shards=int(shards))
    q.open()
    home, target = q.layout.index(job_id), q.layout.index(job_id, lane)
    assert home != target, "the lane must route the id away from its home"
    got = decode_reservation(conn.run(reserve(q.shards[home].k, job_id, q.shards[target].name)))
    print("reserved", got.verdict, flush=True)
    time.sleep(600)  # killed here, before the admission in the lane's shard


if __name__ == "__main__":
    main()
