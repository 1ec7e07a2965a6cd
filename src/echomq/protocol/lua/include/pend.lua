-- pend(pending, lanes, meta, wake, id, lane, head, job): put id on the pending set.
-- The rule (docs/protocol.md "Priorities"; decision 0022): every waiting job's score is
-- its start tag on the queue's virtual time (vtime, the largest tag claimed so far) minus
-- p * AGE for its level p (0..3), whatever kind of job it is and whatever the history:
-- * a job on a lane gets the tag max(vtime, last tag of the lane) + 1: start-time fair
--   queuing, so backlogged lanes are served round-robin and a lane with 10,000 jobs
--   cannot delay a lane with one. The lane's last tag is kept in `lanes` only while the
--   lane has a job waiting (claim drops it). A job with a priority but no lane is tagged
--   on the line '' the same way;
-- * a plain job (no lane, level 0) gets the tag vtime itself (enqueue and enqueue_batch do
--   the same): ahead of the lanes' jobs admitted after it, FIFO among plain jobs (equal
--   tags go by id), and on the same axis as every other tag, so a level-p job is claimed
--   before it unless that job's tag is p * AGE later (not, as before, once vtime had
--   passed p * AGE);
-- * a job that still holds its serial lane (head: it comes back from a retry, deferral or
--   expired lease) scores HEAD - p, before every other job: the lane waits for it, so it
--   must not queue behind the lane's own backlog, where a bounded claim window would
--   never reach it.
-- Aging: a waiting job is overtaken by at most AGE * (p - q) jobs of a higher level p per
-- lane (new tags grow with vtime), so no level starves.
-- Publishes the id on the shard channel when pending goes from empty to not.
-- @include now
-- @include age
local HEAD = -2 ^ 50 -- below any tag minus 3 * AGE, exact as a double
local function pend(pending, lanes, meta, wake, id, lane, head, job)
  local prio = tonumber(redis.call('HGET', job, 'prio') or '0')
  if lane == '' then lane = nil end
  if prio > 0 and not lane then lane = '' end
  local score = HEAD - prio
  if not head then
    score = tonumber(redis.call('HGET', meta, 'vtime') or '0') -- threshold: a plain job's tag
    if lane then
      score = math.max(score, tonumber(redis.call('HGET', lanes, lane) or '0')) + 1
      redis.call('HSET', lanes, lane, fmt(score))
    end
    score = score - prio * AGE -- threshold: priority ages by AGE ticks per level
  end
  redis.call('ZADD', pending, score, id)
  if redis.call('ZCARD', pending) == 1 then
    redis.call('SPUBLISH', wake, id) -- the only pending id: a claim candidate
  end
end
