#!lua flags=allow-oom
-- name: limits
-- summary: Set the queue's rate limits, enforced by the claim gate on the server clock:
--   no window of rate_ms holds more than rate_max leases of the queue, and none of
--   lane_ms more than lane_max leases of one lane. 0 and 0 remove a limit.
-- KEYS[1] meta: emq:{q}:meta, hash: paused and the rate limits
-- KEYS[2] rate: emq:{q}:rate, list, the queue's last lease times, newest first
-- ARGV[1] rate_max: leases per window for the queue, 0..1000000 (0: no limit)
-- ARGV[2] rate_ms: the queue's window in ms, 1..86400000 (0 with rate_max 0)
-- ARGV[3] lane_max: leases per window for one lane, 0..100 (0: no limit)
-- ARGV[4] lane_ms: the lane window in ms, 1..86400000 (0 with lane_max 0)
-- RETURNS: the gate after the call: {paused 0|1, rate_max, rate_ms, lane_max, lane_ms}
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not one queue's; EMQVERSION another
--   major version; nothing written
-- @include fence
-- @include shape
local bad = shape({'meta', 'rate'}, 4)
if bad then return bad end
local v = {}
for i, top in ipairs({1000000, 86400000, 100, 86400000}) do
  v[i] = tonumber(ARGV[i])
  if not v[i] or v[i] < 0 or v[i] > top or v[i] ~= math.floor(v[i]) then
    return redis.error_reply('EMQARG limit argument ' .. i .. ' must be an integer in 0..' .. top)
  end
end
if (v[1] == 0) ~= (v[2] == 0) or (v[3] == 0) ~= (v[4] == 0) then
  return redis.error_reply('EMQARG a limit needs both its max and its window (or neither)')
end
local refused, known = fence(KEYS[1])
if refused then return refused end
if not known then redis.call('HSET', KEYS[1], 'protocol', PROTOCOL, 'plain', '1', 'bare', '1') end
for i, f in ipairs({'rate_max', 'rate_ms', 'lane_max', 'lane_ms'}) do
  if v[i] > 0 then redis.call('HSET', KEYS[1], f, ARGV[i]) else redis.call('HDEL', KEYS[1], f) end
end
if v[1] > 0 then redis.call('LTRIM', KEYS[2], 0, v[1] - 1) end
local m = redis.call('HMGET', KEYS[1], 'paused', 'rate_max', 'rate_ms', 'lane_max', 'lane_ms')
return {m[1] and 1 or 0, tonumber(m[2] or '0'), tonumber(m[3] or '0'), tonumber(m[4] or '0'),
        tonumber(m[5] or '0')}
