-- pend(pending, lanes, meta, wake, id, lane, head, job): put id on the pending set.
-- A plain job (no lane, priority 0) scores 0 (admission order by id: docs/protocol.md,
-- "Keys of queue q"), and so does a
-- job that still holds its serial lane (head: it comes back from a retry, deferral or
-- expired lease): the lane waits for it, so it must not queue behind the lane's own
-- backlog, where a bounded claim window would never reach it.
-- A job on a lane gets the start tag max(vtime, last tag of the lane) + 1:
-- start-time fair queuing, so backlogged lanes are served round-robin and a
-- lane with 10,000 jobs cannot delay a lane with one. The lane's last tag is
-- kept in `lanes` only while the lane has a job waiting (claim drops it). A job with a
-- priority but no lane is tagged on the line '' the same way.
-- Priority p (0..3, the row's 'prio') scores tag - p * AGE: a level is claimed before the
-- levels below it, and it ages: a waiting job is overtaken by at most AGE * (p - q) jobs
-- of a higher level p per lane (its tag grows with vtime), so no level starves.
-- Publishes the id on the shard channel when pending goes from empty to not.
-- @include now
-- @include age
local function pend(pending, lanes, meta, wake, id, lane, head, job)
  local prio = tonumber(redis.call('HGET', job, 'prio') or '0')
  local score = 0
  if lane == '' then lane = nil end
  if prio > 0 and not lane then lane = '' end
  if lane and not head then
    local vtime = tonumber(redis.call('HGET', meta, 'vtime') or '0')
    local last = tonumber(redis.call('HGET', lanes, lane) or '0')
    score = math.max(vtime, last) + 1
    redis.call('HSET', lanes, lane, fmt(score))
  end
  score = score - prio * AGE -- threshold: priority ages by AGE ticks per level
  redis.call('ZADD', pending, score, id)
  if redis.call('ZCARD', pending) == 1 then
    redis.call('SPUBLISH', wake, id) -- the only pending id: a claim candidate
  end
end
