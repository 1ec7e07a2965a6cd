#!lua flags=allow-oom
-- name: pause
-- summary: Pause or resume claims on the queue, or read its gate. A paused queue leases
--   nothing (every script that leases runs the claim gate); admissions, completions,
--   retries and upkeep go on. Resuming tells the wake channel the first pending id, so
--   parked consumers claim at once.
-- KEYS[1] meta: emq:{q}:meta, hash: paused and the rate limits
-- KEYS[2] pending: emq:{q}:pending
-- KEYS[3] wake: emq:{q}:wake, shard channel
-- ARGV[1] paused: '1' pause, '0' resume, '' only read
-- RETURNS: the gate after the call: {paused 0|1, rate_max, rate_ms, lane_max, lane_ms}
--   (0 for a limit not set)
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not one queue's; EMQVERSION another
--   major version; nothing written
-- @include fence
-- @include shape
local bad = shape({'meta', 'pending', 'wake'}, 1)
if bad then return bad end
if ARGV[1] ~= '1' and ARGV[1] ~= '0' and ARGV[1] ~= '' then
  return redis.error_reply("EMQARG paused must be '1', '0' or ''")
end
local refused, known = fence(KEYS[1])
if refused then return refused end
if ARGV[1] == '1' then
  if not known then redis.call('HSET', KEYS[1], 'protocol', PROTOCOL, 'plain', '1', 'bare', '1') end
  redis.call('HSET', KEYS[1], 'paused', '1')
elseif ARGV[1] == '0' and redis.call('HDEL', KEYS[1], 'paused') == 1 then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if first then redis.call('SPUBLISH', KEYS[3], first) end
end
local m = redis.call('HMGET', KEYS[1], 'paused', 'rate_max', 'rate_ms', 'lane_max', 'lane_ms')
return {m[1] and 1 or 0, tonumber(m[2] or '0'), tonumber(m[3] or '0'), tonumber(m[4] or '0'),
        tonumber(m[5] or '0')}
