#!lua
-- name: enqueue_batch
-- summary: Admit many plain jobs in one call (docs/decisions/0027-batch-admission.md): per
--   job, in order, what enqueue.lua does, with the per-call part (key shape, version fence,
--   pending's size) paid once. Each job's id is its key's tail. Every job key is checked
--   before the first write: one not of this queue, or not a JOB id, refuses the whole call.
--   A duplicate (its row exists, or its id came earlier in the call) gets 0 and nothing.
--   While pending is empty and a consumer is parked, each new job is handed off as
--   enqueue.lua hands it off, the claim gate included (docs/decisions/0018, 0022); the
--   others get enqueue.lua's row and go on pending in slices of 512, and the wake channel
--   is told the first of them once, when pending stops being empty.
-- KEYS[1] pending: emq:{q}:pending, sorted set, member id, score = meta's vtime (a plain job's tag)
-- KEYS[2] wake: emq:{q}:wake, shard channel, told the first id when pending stops being empty
-- KEYS[3] meta: emq:{q}:meta, hash, the protocol version (recorded by the first admission); its vtime is a plain job's score (include/pend.lua)
-- KEYS[4] parked: emq:{q}:parked, sorted set of parked consumers (park.lua)
-- KEYS[5] active: emq:{q}:active, sorted set, score = lease deadline (server ms)
-- KEYS[6] rate: emq:{q}:rate, list, the queue's last lease times (the claim gate's log)
-- KEYS[7..] jobs: emq:{q}:job:<id> of each job, in order (n keys)
-- ARGV[1] token: this call's token (at most 32 bytes, '' for none), kept in each row it
--   admits as 'tok': a resend of this call answers 1 for the jobs its first send admitted
-- ARGV[2..] payloads: each job's bytes, in the same order (n args)
-- RETURNS: a string of n digits, one verdict per job in order: 1 enqueued (by this call) |
--   0 duplicate
-- ERRORS: EMQKIND an id is not JOB-namespaced; EMQARG a token over 32 bytes; EMQKEYS a key
--   not this queue's, or not one payload per job; EMQVERSION another major version; nothing
--   written
-- @include now
-- @include fence
-- @include shape
-- @include gate
-- @include handoff
local n = #KEYS - 6
if n < 1 or #ARGV ~= n + 1 then
  return redis.error_reply('EMQKEYS ' .. #KEYS .. ' keys and ' .. #ARGV .. ' args: not one payload per job key')
end
local bad = shape({'pending', 'wake', 'meta', 'parked', 'active', 'rate'}, 1, 6)
if bad then return bad end
local tok = ARGV[1]
if #tok > 32 then return redis.error_reply('EMQARG token must be at most 32 bytes') end
local jp = string.sub(KEYS[1], 1, -8) .. 'job:' -- KEYS[1] is <prefix>pending
local at, kind = #jp + 1, jp .. 'JOB'
for j = 7, 6 + n do
  if string.sub(KEYS[j], 1, at + 2) ~= kind then
    if string.sub(KEYS[j], 1, at - 1) == jp then
      return redis.error_reply('EMQKIND job id must be JOB-namespaced (KEYS[' .. j .. '])')
    end
    return redis.error_reply('EMQKEYS KEYS[' .. j .. '] is not a job key of this queue')
  end
end
local refused, known = fence(KEYS[3])
if refused then return refused end
local empty = redis.call('ZCARD', KEYS[1]) == 0
-- Numbers would be formatted one by one (sprintf) where a redis.call or table.concat
-- takes them: the scores and verdicts are strings.
local out, seen, first = {}, {}, nil
local tag = redis.call('HGET', KEYS[3], 'vtime') or '0' -- threshold: a plain job's tag is vtime
for s = 1, n, 512 do
  local e = math.min(s + 511, n)
  local some = redis.call('EXISTS', unpack(KEYS, 6 + s, 6 + e)) > 0 -- rows exist: look per job
  local add, m = {}, 0
  for j = s, e do
    local job = KEYS[6 + j]
    local id = string.sub(job, at)
    if seen[id] or (some and redis.call('EXISTS', job) == 1) then
      out[j] = '0'
      if not seen[id] and tok ~= '' and redis.call('HGET', job, 'tok') == tok then -- a resend
        seen[id], out[j] = true, '1' -- of this call, whose first send admitted it
      end
    else
      seen[id], out[j] = true, '1'
      if not (empty and handoff(KEYS[4], KEYS[5], job, KEYS[2], id, ARGV[j + 1], KEYS[3], KEYS[6], tok)) then
        if empty then first, empty = id, false end
        redis.call('HSET', job, 'state', 'pending', 'attempts', '0', 'payload', ARGV[j + 1], 'tok', tok)
        add[m + 1], add[m + 2], m = tag, id, m + 2
      end
    end
  end
  if m > 0 then redis.call('ZADD', KEYS[1], unpack(add, 1, m)) end
end
if not known and next(seen) then redis.call('HSET', KEYS[3], 'protocol', PROTOCOL, 'plain', '1', 'bare', '1') end
if first then
  redis.call('SPUBLISH', KEYS[2], first) -- the id: a claim candidate for the woken
end
return table.concat(out)
