#!lua flags=allow-oom
-- name: cancel
-- summary: Delete the candidate jobs that are still waiting (pending or delayed): each is
--   taken off its set, frees its serial lane if it holds it, and loses its row. A candidate
--   that is active, done, dead or gone is skipped. The lane's last start tag in `lanes` is
--   left as it is: lowering it could let a later job of the lane overtake one still waiting.
-- KEYS[1] pending: emq:{q}:pending
-- KEYS[2] delayed: emq:{q}:delayed
-- KEYS[3] inflight: emq:{q}:inflight
-- KEYS[4] meta: emq:{q}:meta
-- KEYS[5..] jobs: emq:{q}:job:<id> for each candidate, in ARGV order
-- ARGV[1..] ids: the candidate ids
-- RETURNS: the number of jobs deleted
-- ERRORS: EMQKEYS job keys not the ids' or not this queue's; EMQVERSION another major
--   version; nothing written
-- @include release
-- @include fence
-- @include shape
local bad = shape({'pending', 'delayed', 'inflight', 'meta'}, 0, 4, 0)
if bad then return bad end
local refused = fence(KEYS[4])
if refused then return refused end
local removed = 0
for i = 1, #ARGV do
  local id, job = ARGV[i], KEYS[i + 4]
  local row = redis.call('HMGET', job, 'state', 'lane')
  local set = (row[1] == 'pending' and KEYS[1]) or (row[1] == 'delayed' and KEYS[2]) or nil
  if set and redis.call('ZREM', set, id) == 1 then
    release(KEYS[3], row[2], id)
    redis.call('DEL', job)
    removed = removed + 1
  end
end
return removed
