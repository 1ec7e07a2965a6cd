#!lua flags=allow-oom
-- name: unload_row
-- summary: Remove one job, moved to the new layout by an online reshard, from a shard of
--   the retired layout: its row, its entry in every state set (and the expiring index) and its hold on a serial
--   lane (docs/decisions/0032-online-reshard.md). Runs on a retired shard, so it does
--   not run the version fence: only the reshard's mover calls it, after import_row.
-- KEYS[1] job: emq:{q}:job:<id>, hash, the job's row
-- KEYS[2] pending: emq:{q}:pending
-- KEYS[3] delayed: emq:{q}:delayed
-- KEYS[4] done: emq:{q}:done
-- KEYS[5] dead: emq:{q}:dead
-- KEYS[6] inflight: emq:{q}:inflight
-- KEYS[7] expired: emq:{q}:expired
-- KEYS[8] expiring: emq:{q}:expiring
-- ARGV[1] id: the branded job id
-- ARGV[2] only: '' removes the row whatever it holds; a state (the mover passes 'reserved',
--   for the moved job's reservation in the old layout, decision 0040) removes only a row
--   in that state
-- RETURNS: 1 removed | 0 there was no such row (or not in state only)
-- ERRORS: EMQKEYS keys not this id's queue; nothing written
-- @include shape
local bad = shape({'job:' .. (ARGV[1] or ''), 'pending', 'delayed', 'done', 'dead', 'inflight',
                   'expired', 'expiring'}, 2)
if bad then return bad end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'state') ~= ARGV[2] then return 0 end
local lane = redis.call('HGET', KEYS[1], 'lane')
if lane and redis.call('HGET', KEYS[6], lane) == ARGV[1] then redis.call('HDEL', KEYS[6], lane) end
for i = 2, 8 do if i ~= 6 then redis.call('ZREM', KEYS[i], ARGV[1]) end end
return redis.call('DEL', KEYS[1])
