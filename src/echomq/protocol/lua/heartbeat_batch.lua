#!lua flags=allow-oom
-- name: heartbeat_batch
-- summary: Extend the leases of several attempts of one queue in one call (a consumer's
--   beat; decision 0055), each exactly as `heartbeat` does: only while that attempt still
--   holds a live lease (state active, attempts equal to its token, a lease on active whose
--   deadline has not passed on the server clock), a job asked to stop still extended and
--   the reply's sign saying so. One reply per lease, in order. Every argument is checked
--   before the first write; one ZADD extends every live lease (at most 256 leases a call).
-- KEYS[1] active: emq:{q}:active, sorted set, score = lease deadline (server ms)
-- KEYS[2] meta: emq:{q}:meta
-- KEYS[3..] jobs: emq:{q}:job:<id> for each lease, in the order of the id/attempt pairs
-- ARGV[1] lease_ms: the new lease from the server's now, 1..86400000
-- ARGV[2..] leases: id and attempt (the fencing token its claim returned) of each lease,
--   flat; 1..256 leases
-- RETURNS: array, one per lease in order: the new deadline (server ms) | minus the new
--   deadline: extended, and a cancel was asked for | 0 the lease is lost (reaped,
--   finished, or re-claimed)
-- ERRORS: EMQARG a malformed argument, or not 1..256 leases; EMQKEYS job keys not the ids'
--   or not this queue's; EMQVERSION another major version; nothing written
-- @include now
-- @include fence
-- @include shape
local bad = shape({'active', 'meta'}, 1, 2, nil) -- jobs below: two args per job key
local n = #KEYS - 2
if bad or #ARGV ~= 1 + 2 * n then
  return bad or redis.error_reply('EMQKEYS one job key per id, attempt pair expected')
end
if n < 1 or n > 256 then -- threshold: the batch bound (echomq.core.bounds.MAX_BEATS)
  return redis.error_reply('EMQARG 1..256 leases a call, not ' .. n)
end
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'active') .. 'job:'
local ids = {}
for i = 1, n do
  ids[i] = ARGV[2 * i]
  if KEYS[i + 2] ~= prefix .. ids[i] then -- fence: each job key is its own id's
    return redis.error_reply('EMQKEYS KEYS[' .. (i + 2) .. '] is not the job of its id')
  end
end
local lease = tonumber(ARGV[1])
if not lease or lease < 1 or lease > 86400000 or lease ~= math.floor(lease) then -- threshold
  return redis.error_reply('EMQARG lease_ms must be an integer in 1..86400000')
end
local refused = fence(KEYS[2])
if refused then return refused end
local now = now_ms() -- redis.call itself below, no local alias: the declared-keys twin checks each
local current = redis.call('ZMSCORE', KEYS[1], unpack(ids)) -- n <= 256: a bounded unpack
-- The earliest lease on active, read once: when it has not run out, no lease has, and no
-- lease's deadline needs a number conversion of its own (a strtod per lease otherwise).
local first = n > 2 and redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
local fresh = first and tonumber(first) >= now -- fence: every lease on active is live
local deadline = now + lease
local due = fmt(deadline) -- the ZADD's score, formatted once
local out, add = {}, {}
for i = 1, n do
  local row = redis.call('HMGET', KEYS[i + 2], 'state', 'attempts', 'cancel')
  local live = row[1] == 'active' and current[i] ~= false -- running, with a lease on active
  live = live and row[2] == ARGV[2 * i + 1] -- fence: another attempt holds it
  live = live and (fresh or tonumber(current[i]) >= now) -- fence: the lease deadline passed
  out[i] = live and (row[3] and -deadline or deadline) or 0 -- fence: asked to stop: the sign tells
  if live then add[#add + 1], add[#add + 2] = due, ids[i] end
end
if #add > 0 then redis.call('ZADD', KEYS[1], unpack(add)) end -- at most 512 arguments
return out
