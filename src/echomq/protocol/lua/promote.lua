#!lua flags=allow-oom
-- name: promote
-- summary: Move the candidate delayed jobs (peeked by the client, earliest first) whose due
--   time has come on the server clock to pending. Bounded by the number of candidates.
-- KEYS[1] delayed: emq:{q}:delayed
-- KEYS[2] pending: emq:{q}:pending
-- KEYS[3] lanes: emq:{q}:lanes
-- KEYS[4] meta: emq:{q}:meta
-- KEYS[5] wake: emq:{q}:wake
-- KEYS[6] inflight: emq:{q}:inflight, so a job that still holds its serial lane goes first
-- KEYS[7..] jobs: emq:{q}:job:<id> for each candidate, in ARGV order
-- ARGV[1..] ids: the candidate ids
-- RETURNS: the number of jobs promoted
-- ERRORS: EMQKEYS job keys not the ids' or not this queue's; EMQVERSION another major
--   version; nothing written
-- @include now
-- @include age
-- @include pend
-- @include fence
-- @include shape
local bad = shape({'delayed', 'pending', 'lanes', 'meta', 'wake', 'inflight'}, 0, 6, 0)
if bad then return bad end
local refused = fence(KEYS[4])
if refused then return refused end
local now = now_ms()
local moved = 0
for i = 1, #ARGV do
  local id, job = ARGV[i], KEYS[i + 6]
  local due = redis.call('ZSCORE', KEYS[1], id)
  if due and tonumber(due) <= now then -- threshold: due on the server clock
    redis.call('ZREM', KEYS[1], id)
    if redis.call('EXISTS', job) == 1 then
      redis.call('HSET', job, 'state', 'pending')
      local lane = redis.call('HGET', job, 'lane')
      pend(KEYS[2], KEYS[3], KEYS[4], KEYS[5], id, lane,
           lane and redis.call('HGET', KEYS[6], lane) == id, job)
      moved = moved + 1
    end
  end
end
return moved
