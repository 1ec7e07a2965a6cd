"""Search: jobs found by state, lane, error type or text, admission time and id prefix, in
cursor-paged windows of bounded work; a complete walk sees every job once (decision 0037)."""

from __future__ import annotations

import pytest

from echomq import AsyncQueue, InvalidArgument, QueueOptions, generate
from echomq.core.ids import timestamp_ms
from echomq.protocol.search import SearchHit, SearchQuery


async def _walk(queue: AsyncQueue, query: SearchQuery, *, limit: int = 5, budget: int = 7) -> list[SearchHit]:
    """Every hit of a query, page after page from the cursor."""
    hits: list[SearchHit] = []
    page = await queue.search(query, limit=limit, budget=budget, max_windows=3)
    hits += page.hits
    for _ in range(10_000):
        if page.cursor is None:
            return hits
        page = await queue.search(query, cursor=page.cursor, limit=limit, budget=budget, max_windows=3)
        hits += page.hits
    raise AssertionError("the walk did not end")


async def _mixed(conn, qname: str) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """A queue with jobs in every state: 30 pending (10 on lane "a", 5 on lane "b"), 6 delayed,
    4 active, 5 done, 6 dead with two kinds of error. The ids of each group."""
    queue = AsyncQueue(conn, qname, options=QueueOptions(max_attempts=1))
    groups: dict[str, list[str]] = {k: [] for k in ("plain", "a", "b", "delayed", "active", "done",
                                                       "dead_value", "dead_key")}
    for name, n in (("done", 5), ("dead_value", 3), ("dead_key", 3), ("active", 4)):
        ids = [generate("JOB") for _ in range(n)]
        await queue.enqueue_many([(i, b"p") for i in ids])
        leases = await queue.claim(n, lease_ms=60_000)
        assert sorted(x.id for x in leases) == sorted(ids)
        for i, lease in enumerate(leases):
            if name == "done":
                await queue.complete(lease)
            elif name == "dead_value":
                await queue.retry(lease, delay_ms=0, error=f"ValueError: bad input {i}\nTraceback ...")
            elif name == "dead_key":
                await queue.retry(lease, delay_ms=0, error=f"KeyError: 'order-{i}'")
        groups[name] = ids
    for _ in range(15):
        groups["plain"].append(generate("JOB"))
        await queue.enqueue(groups["plain"][-1], b"p")
    for lane, n in (("a", 10), ("b", 5)):
        for _ in range(n):
            groups[lane].append(generate("JOB"))
            await queue.admit(groups[lane][-1], b"p", lane=lane)
    for _ in range(6):
        groups["delayed"].append(generate("JOB"))
        await queue.admit(groups["delayed"][-1], b"p", delay_ms=600_000)
    return groups


async def test_a_full_walk_finds_every_job_once_in_each_state(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    groups = await _mixed(conn, qname)
    queue = AsyncQueue(conn, qname)
    hits = await _walk(queue, SearchQuery())
    assert len(hits) == len({h.id for h in hits}) == sum(map(len, groups.values()))
    by_state = {s: sorted(h.id for h in hits if h.state == s) for s in ("pending", "active", "delayed",
                                                                        "done", "dead")}
    assert by_state == {"pending": sorted(groups["plain"] + groups["a"] + groups["b"]),
                        "active": sorted(groups["active"]), "delayed": sorted(groups["delayed"]),
                        "done": sorted(groups["done"]),
                        "dead": sorted(groups["dead_value"] + groups["dead_key"])}
    order = [h.state for h in hits]
    assert order == sorted(order, key=["pending", "active", "delayed", "done", "dead"].index)


async def test_filters_find_exactly_their_jobs(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    groups = await _mixed(conn, qname)
    queue = AsyncQueue(conn, qname)

    async def ids(**query: object) -> list[str]:
        return sorted(h.id for h in await _walk(queue, SearchQuery(**query)))  # type: ignore[arg-type]

    assert await ids(lane="a") == sorted(groups["a"])
    assert await ids(lane="b", states=("pending",)) == sorted(groups["b"])
    assert await ids(states=("delayed",)) == sorted(groups["delayed"])
    assert await ids(error_type="ValueError") == sorted(groups["dead_value"])
    assert await ids(error_type="Value") == []  # a type's whole name, not its start
    assert await ids(text="order-1") == [groups["dead_key"][1]]
    assert await ids(text="Traceback") == []  # the error's first line only
    hits = await _walk(queue, SearchQuery(error_type="KeyError"))
    assert {h.error for h in hits} == {f"KeyError: 'order-{i}'" for i in range(3)}
    everyone = sorted(i for g in groups.values() for i in g)
    pick = groups["a"][4]
    assert await ids(id_prefix=pick) == [pick]
    assert await ids(id_prefix=pick[:-1]) == [i for i in everyone if i.startswith(pick[:-1])]
    t = timestamp_ms(pick)
    assert await ids(since_ms=t, until_ms=t) == [i for i in everyone if timestamp_ms(i) == t]
    assert await ids(since_ms=t) == [i for i in everyone if timestamp_ms(i) >= t]
    assert await ids(until_ms=t - 1) == [i for i in everyone if timestamp_ms(i) < t]
    assert await ids(since_ms=t + 1, until_ms=t) == []


async def test_a_page_holds_at_most_limit_hits_and_the_cursor_goes_on_after_the_last(
        queue: AsyncQueue) -> None:
    ids = [generate("JOB") for _ in range(25)]
    await queue.enqueue_many([(i, b"") for i in ids])
    page = await queue.search(SearchQuery(states=("pending",)), limit=10, budget=500)
    assert [h.id for h in page.hits] == ids[:10] and page.windows == 1 and page.cursor
    rest = await queue.search(SearchQuery(states=("pending",)), cursor=page.cursor, limit=100)
    assert [h.id for h in rest.hits] == ids[10:] and rest.cursor is None


async def test_the_walk_goes_on_when_the_cursor_job_left_its_state(queue: AsyncQueue) -> None:
    """Pending jobs share score 0: the window after a vanished cursor is found among them by
    id; nothing that stayed is skipped or seen twice."""
    ids = [generate("JOB") for _ in range(40)]
    await queue.enqueue_many([(i, b"") for i in ids])
    query = SearchQuery(states=("pending",))
    page = await queue.search(query, limit=10, budget=10, max_windows=1)
    assert [h.id for h in page.hits] == ids[:10]
    await queue.cancel([ids[9], ids[10], ids[3]])  # the cursor's job, the next one, one behind
    rest = []
    cursor = page.cursor
    while cursor is not None:
        got = await queue.search(query, cursor=cursor, limit=7, budget=7, max_windows=1)
        rest += [h.id for h in got.hits]
        cursor = got.cursor
    assert rest == ids[11:]


async def test_bad_queries_and_cursors_are_refused_before_any_call(queue: AsyncQueue) -> None:
    with pytest.raises(InvalidArgument):
        SearchQuery(states=("running",))
    with pytest.raises(InvalidArgument):
        SearchQuery(error_type="ValueError: x")
    with pytest.raises(InvalidArgument):
        SearchQuery(since_ms=-1)
    with pytest.raises(InvalidArgument):
        await queue.search(SearchQuery(), budget=501)
    with pytest.raises(InvalidArgument):
        await queue.search(SearchQuery(), cursor="pending/x/JOB")
    with pytest.raises(InvalidArgument):
        await queue.search(SearchQuery(states=("dead",)), cursor="pending//")
