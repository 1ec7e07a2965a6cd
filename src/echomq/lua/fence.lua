#!lua flags=allow-oom
-- name: fence
-- summary: The protocol version fence. Records the client's protocol version on a queue
--   that has none; accepts the same major version; refuses any other.
-- KEYS[1] meta: emq:{q}:meta
-- ARGV[1] version: the client's protocol, e.g. 'echomq:3.0.0'
-- RETURNS: the version recorded for the queue
-- ERRORS: EMQVERSION the queue was written by an incompatible major version; nothing written
local recorded = redis.call('HGET', KEYS[1], 'protocol')
if not recorded then
  redis.call('HSET', KEYS[1], 'protocol', ARGV[1])
  return ARGV[1]
end
local function major(v) return string.match(v, '^echomq:(%d+)%.') end
if major(recorded) == nil or major(recorded) ~= major(ARGV[1]) then
  return redis.error_reply('EMQVERSION queue speaks ' .. recorded .. ', client speaks ' .. ARGV[1])
end
return recorded
