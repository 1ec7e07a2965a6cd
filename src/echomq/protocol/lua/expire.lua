#!lua flags=allow-oom
-- name: expire
-- summary: The expiry reaper (docs/decisions/0045-expiry.md). Of the candidate ids, peeked
--   by the client from the expiring index (earliest deadline first, at most reap_batch of
--   them), each whose deadline has passed on the server clock and that still waits (pending
--   or delayed) ends 'expired' (include/expiry.lua): off its set, its serial lane freed, its
--   row kept in the expired set, a flow parent noticed. An entry whose job started, ended or
--   is gone leaves the index; one not yet due is left. Ended jobs are told on the finished
--   channel. Bounded by the number of candidates (at most 10,000).
-- KEYS[1] expiring: emq:{q}:expiring, sorted set, score = deadline (server ms)
-- KEYS[2] pending: emq:{q}:pending
-- KEYS[3] delayed: emq:{q}:delayed
-- KEYS[4] expired: emq:{q}:expired, sorted set, score = when it expired (server ms)
-- KEYS[5] inflight: emq:{q}:inflight
-- KEYS[6] meta: emq:{q}:meta
-- KEYS[7] finished: emq:{q}:finished, shard channel told the ids of jobs that ended
-- KEYS[8..] jobs: emq:{q}:job:<id> for each candidate, in ARGV order
-- ARGV[1..] ids: the candidate ids
-- RETURNS: {expired, entries dropped from the index (their job no longer waits)}
-- ERRORS: EMQARG more than 10,000 candidates; EMQKEYS job keys not the ids' or not this
--   queue's; EMQVERSION another major version; nothing written
-- @include now
-- @include expiry
-- @include fence
-- @include shape
local bad = shape({'expiring', 'pending', 'delayed', 'expired', 'inflight', 'meta', 'finished'},
                  0, 7, 0)
if bad then return bad end
if #ARGV > 10000 then return redis.error_reply('EMQARG at most 10000 candidates a call') end
local refused = fence(KEYS[6])
if refused then return refused end
local now = now_ms()
local expired, dropped, told = 0, 0, {}
for i = 1, #ARGV do
  local id, job = ARGV[i], KEYS[i + 7]
  local at = redis.call('ZSCORE', KEYS[1], id)
  if at and tonumber(at) <= now then -- threshold: the deadline passed
    redis.call('ZREM', KEYS[1], id)
    local row = redis.call('HMGET', job, 'state', 'lane')
    local set = (row[1] == 'pending' and KEYS[2]) or (row[1] == 'delayed' and KEYS[3]) or nil
    if set and redis.call('ZREM', set, id) == 1 then
      expire(job, KEYS[4], KEYS[5], KEYS[7], id, row[2], now)
      expired, told[#told + 1] = expired + 1, id
    else
      dropped = dropped + 1 -- started (active), ended or gone: its deadline no longer binds
    end
  end
end
if #told > 0 then redis.call('SPUBLISH', KEYS[7], table.concat(told, ' ')) end
return {expired, dropped}
