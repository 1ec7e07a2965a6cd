#!lua flags=allow-oom
-- name: fence
-- summary: The protocol version fence on its own (every other script runs it too).
--   Records this bundle's protocol version on a queue that has none; accepts the same
--   major version; refuses any other.
-- KEYS[1] meta: emq:{q}:meta
-- ARGV[1] version: the client's protocol, which must be this bundle's ('echomq:3.0.0')
-- RETURNS: the version recorded for the queue
-- ERRORS: EMQARG a version other than the bundle's; EMQKEYS not a meta key;
--   EMQVERSION the queue was written by an incompatible major version; nothing written
-- @include fence
-- @include shape
local bad = shape({'meta'}, 1)
if bad then return bad end
if ARGV[1] ~= PROTOCOL then
  return redis.error_reply('EMQARG version must be ' .. PROTOCOL)
end
local refused, known = fence(KEYS[1])
if refused then return refused end
if not known then -- a new queue: no row has a lane, priority, timeout ('plain'), parent or cancel request ('bare') yet
  redis.call('HSET', KEYS[1], 'protocol', PROTOCOL, 'plain', '1', 'bare', '1')
  return PROTOCOL
end
return redis.call('HGET', KEYS[1], 'protocol')
