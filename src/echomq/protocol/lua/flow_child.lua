#!lua flags=allow-oom
-- name: flow_child
-- summary: The child's side of a flow for workers (docs/decisions/0038-flows.md). mode
--   'drop': a held child is deleted (its parent never was admitted, or was cancelled); any
--   other state is left as it is. mode 'ack': the relay delivered the child's notice; it is
--   deleted from the finished hash if it still reads note (a newer notice stays).
-- KEYS[1] job: emq:{q}:job:<id>
-- KEYS[2] held: emq:{q}:held
-- KEYS[3] meta: emq:{q}:meta
-- KEYS[4] finished: emq:{q}:finished, the hash of flow notices (child id -> notice)
-- ARGV[1] mode: 'drop' or 'ack'
-- ARGV[2] id: the child's id
-- ARGV[3] note: the notice delivered (mode ack; '' otherwise)
-- RETURNS: 1 done | 0 nothing to do (not held; or the notice is gone or newer)
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not this id's queue; EMQVERSION another
--   major version; nothing written
-- @include fence
-- @include shape
local bad = shape({'job:' .. (ARGV[2] or ''), 'held', 'meta', 'finished'}, 3)
if bad then return bad end
local mode = ARGV[1]
if mode ~= 'drop' and mode ~= 'ack' then
  return redis.error_reply('EMQARG mode must be drop or ack')
end
local refused = fence(KEYS[3])
if refused then return refused end
if mode == 'ack' then
  if redis.call('HGET', KEYS[4], ARGV[2]) ~= ARGV[3] then return 0 end -- fence: a newer notice
  redis.call('HDEL', KEYS[4], ARGV[2])
  return 1
end
if redis.call('HGET', KEYS[1], 'state') ~= 'held' then return 0 end -- fence: drop only a held child
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('DEL', KEYS[1])
return 1
