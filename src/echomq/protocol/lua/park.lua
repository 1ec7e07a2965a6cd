#!lua
-- name: park
-- summary: Register an idle consumer for hand-off on admission (docs/decisions/0018), or
--   withdraw it. Parks only while pending is empty: with work waiting the consumer should
--   claim it, so nothing is written and 0 comes back. A registration lives ttl_ms on the
--   server clock (the consumer renews it every beat while idle), so one left by a consumer
--   that died expires by itself; the key's own expiry follows the newest registration.
-- KEYS[1] pending: emq:{q}:pending
-- KEYS[2] parked: emq:{q}:parked, sorted set, member '<lease_ms>|<token>', score = expiry (ms)
-- KEYS[3] meta: emq:{q}:meta
-- ARGV[1] token: the consumer's hand-off token (1..64 of [0-9A-Za-z_.@-])
-- ARGV[2] lease_ms: the lease a handed-off job gets, 1..86400000
-- ARGV[3] ttl_ms: how long the registration lives, 1..86400000; 0 withdraws it
-- RETURNS: 1 parked (or withdrawn) | 0 not parked: pending has work
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not one queue's; EMQVERSION another
--   major version; nothing written
-- @include now
-- @include fence
-- @include shape
local bad = shape({'pending', 'parked', 'meta'}, 3)
if bad then return bad end
if not string.match(ARGV[1], '^[%w_.@-]+$') or #ARGV[1] > 64 then
  return redis.error_reply('EMQARG token must be 1..64 of [0-9A-Za-z_.@-]')
end
local lease, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
if not lease or lease < 1 or lease > 86400000 or lease ~= math.floor(lease) then
  return redis.error_reply('EMQARG lease_ms must be an integer in 1..86400000')
end
if not ttl or ttl < 0 or ttl > 86400000 or ttl ~= math.floor(ttl) then
  return redis.error_reply('EMQARG ttl_ms must be an integer in 0..86400000')
end
local refused = fence(KEYS[3])
if refused then return refused end
local member = ARGV[2] .. '|' .. ARGV[1]
if ttl == 0 then
  redis.call('ZREM', KEYS[2], member)
  return 1
end
if redis.call('ZCARD', KEYS[1]) > 0 then return 0 end
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. fmt(now))
redis.call('ZADD', KEYS[2], now + ttl, member)
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
