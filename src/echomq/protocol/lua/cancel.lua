#!lua flags=allow-oom
-- name: cancel
-- summary: Cancel the candidate jobs, each as its state allows, in one step. A waiting job
--   (pending or delayed) ends at once: off its set, its serial lane freed, its row kept as
--   'cancelled' in the done set (ended), the finished channel told. An active job is asked
--   to stop: its row records 'cancel' (server ms, the first ask); heartbeat and progress tell
--   its attempt, and whichever transition ends that attempt (complete, retry, reap) ends the
--   job 'cancelled', never done (and meta 'bare' is cleared for good: the finish reads the
--   request, decision 0050). A done, dead, cancelled or unknown job is left as it is.
--   The lane's last start tag in `lanes` stays: lowering it could let a later job overtake.
-- KEYS[1] pending: emq:{q}:pending
-- KEYS[2] delayed: emq:{q}:delayed
-- KEYS[3] done: emq:{q}:done
-- KEYS[4] inflight: emq:{q}:inflight
-- KEYS[5] meta: emq:{q}:meta, hash; a request clears its 'bare' (decision 0050)
-- KEYS[6] finished: emq:{q}:finished, shard channel told the ids of jobs that ended
-- KEYS[7..] jobs: emq:{q}:job:<id> for each candidate, in ARGV order
-- ARGV[1..] ids: the candidate ids
-- RETURNS: array, one per id in order: 1 cancelled | 2 asked to stop (active) | 0 left as
--   it is (finished or unknown)
-- ERRORS: EMQKEYS job keys not the ids' or not this queue's; EMQVERSION another major
--   version; nothing written
-- @include now
-- @include release
-- @include ended
-- @include flows
-- @include fence
-- @include shape
local bad = shape({'pending', 'delayed', 'done', 'inflight', 'meta', 'finished'}, 0, 6, 0)
if bad then return bad end
local refused = fence(KEYS[5])
if refused then return refused end
local now = now_ms()
local out, told, asked = {}, {}, false
for i = 1, #ARGV do
  local id, job = ARGV[i], KEYS[i + 6]
  local row = redis.call('HMGET', job, 'state', 'lane', 'parent')
  local set = (row[1] == 'pending' and KEYS[1]) or (row[1] == 'delayed' and KEYS[2]) or nil
  out[i] = 0
  if set and redis.call('ZREM', set, id) == 1 then
    release(KEYS[4], row[2], id)
    ended(job, KEYS[3], id, now)
    told[#told + 1] = id
    if row[3] then flow_told(KEYS[6], id, row[3], 'cancelled') end
    out[i] = 1
  elseif row[1] == 'active' then
    redis.call('HSETNX', job, 'cancel', fmt(now))
    out[i], asked = 2, true
  end
end
if asked then redis.call('HDEL', KEYS[5], 'bare') end -- fence: the finish reads the request
if #told > 0 then redis.call('SPUBLISH', KEYS[6], table.concat(told, ' ')) end
return out
