#!lua flags=no-writes
-- name: peek
-- summary: The ids at a range of ranks of one state's set, behind the version fence: the
--   first step of every peek-then-act transition (decision 0002) and of browse.
-- KEYS[1] set: emq:{q}:<pending|active|delayed|done|dead>
-- KEYS[2] meta: emq:{q}:meta
-- ARGV[1] start: the first rank, 0..2^53
-- ARGV[2] count: how many ids at most, 0..20064
-- RETURNS: the ids at ranks start..start+count-1, in set order (empty when count is 0)
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not one queue's; EMQVERSION another
--   major version
-- @include fence
-- @include shape
local bad = shape({false, 'meta'}, 2)
if bad then return bad end
local start, count = tonumber(ARGV[1]), tonumber(ARGV[2])
if not start or start < 0 or start > 9007199254740992 or start ~= math.floor(start) then
  return redis.error_reply('EMQARG start must be an integer in 0..2^53')
end
if not count or count < 0 or count > 20064 or count ~= math.floor(count) then
  return redis.error_reply('EMQARG count must be an integer in 0..20064')
end
local refused = fence(KEYS[2])
if refused then return refused end
if count == 0 then return {} end
return redis.call('ZRANGE', KEYS[1], ARGV[1], string.format('%.0f', start + count - 1))
