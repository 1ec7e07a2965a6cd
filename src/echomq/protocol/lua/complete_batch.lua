#!lua flags=allow-oom
-- name: complete_batch
-- summary: Finish several attempts in one call, each exactly as `complete` does: fenced by
--   (id, attempt) and by its live lease on the server clock, the lease cleared in the same
--   step, the row kept for keep_ms in the done set without its payload (or deleted when
--   keep_ms is 0), or ended 'cancelled' when a cancel was asked for. One verdict per
--   attempt; a stale attempt changes nothing. Every check precedes the first write, the set
--   updates go out in slices of 256 (no unbounded unpack), the finished channel is told once.
-- KEYS[1] active: emq:{q}:active
-- KEYS[2] done: emq:{q}:done, sorted set, score = finish time (server ms)
-- KEYS[3] inflight: emq:{q}:inflight
-- KEYS[4] meta: emq:{q}:meta, hash; its 'plain' and 'bare' say which row fields the finish reads (decision 0050)
-- KEYS[5] finished: emq:{q}:finished, shard channel told the ids of jobs that ended
-- KEYS[6..] jobs: emq:{q}:job:<id> for each attempt, in the order of the id/attempt pairs
-- ARGV[1] keep_ms: retention of the finished rows, 0..31622400000; 0 deletes them now
-- ARGV[2] token: this call's token (at most 32 bytes), kept with each verdict in its row as
--   'fin' (include/earned.lua): a resend of this call answers what its first send earned
-- ARGV[3..] attempts: id, attempt and result ('' for none) of each attempt, flat; each
--   result at most 524288 bytes, all of one call at most 4194304; past maxmemory results
--   over 1024 bytes in all are refused (OOM)
-- RETURNS: array, one per attempt in order: 1 completed | 2 cancelled | 0 stale; a resend:
--   its first send's verdicts
-- ERRORS: EMQARG a malformed argument; EMQKEYS job keys not the ids' or not this queue's;
--   EMQVERSION another major version; OOM results past maxmemory; nothing written
-- @include now
-- @include bytes
-- @include release
-- @include ended
-- @include flows
-- @include fence
-- @include shape
-- @include earned
local bad = shape({'active', 'done', 'inflight', 'meta', 'finished'}, 1, 5, nil) -- jobs below
local n = #KEYS - 5
if bad or #ARGV ~= 2 + 3 * n then
  return bad or redis.error_reply('EMQKEYS one job key per id, attempt, result triple expected')
end
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'active') .. 'job:'
for i = 1, n do
  if KEYS[i + 5] ~= prefix .. ARGV[3 * i] then
    return redis.error_reply('EMQKEYS KEYS[' .. (i + 5) .. '] is not the job of its id')
  end
end
local keep = tonumber(ARGV[1])
if not keep or keep < 0 or keep > 31622400000 or keep ~= math.floor(keep) then
  return redis.error_reply('EMQARG keep_ms must be an integer in 0..31622400000')
end
local tok = ARGV[2]
if #tok > 32 then return redis.error_reply('EMQARG token must be at most 32 bytes') end
local kept, big = 0, nil
for i = 1, n do -- too_long is called only for a result over the bound (a call costs per job)
  local size = #ARGV[3 * i + 2]
  if size > MAX_RESULT then big = big or too_long('result', #ARGV[3 * i + 2], MAX_RESULT) end
  kept = kept + size
end
big = big or too_long('results of one call', kept, MAX_RESULTS) or (keep > 0 and full(kept))
if big then return big end
local refused, _, m = fence(KEYS[4], 'plain', 'bare')
if refused then return refused end
-- What meta says no row of the queue has (decision 0050): 'bare', no parent and no cancel
-- request; 'plain' too, no lane. A plain job's row is read for its state and attempt only.
local bare = m[3] == '1' -- fence: no row has a parent or a cancel request
local lean = bare and m[2] == '1' -- fence: nor a lane
local call, now, fin = redis.call, now_ms(), '1' .. ARGV[2]
local at = fmt(now) -- the done score, formatted once
-- The earliest lease on active, read once: when it has not run out, no lease has, and no
-- attempt's deadline needs a number conversion of its own (a strtod per job otherwise).
local first = n > 2 and call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
local fresh = first and tonumber(first) >= now -- fence: every lease on active is live
local out, won, lanes, seen, parents = {}, {}, {}, {}, {}
for s = 1, n, 256 do -- reads only: which attempts hold a live lease (one ZMSCORE a slice)
  local ids, e = {}, math.min(s + 255, n)
  for i = s, e do ids[i - s + 1] = ARGV[3 * i] end
  local deadlines = call('ZMSCORE', KEYS[1], unpack(ids))
  for i = s, e do
    local id, attempt, deadline = ARGV[3 * i], ARGV[3 * i + 1], deadlines[i - s + 1]
    local live = deadline ~= false and not seen[id] -- leased, and finished once
    if live then
      local job = KEYS[i + 5]
      local row = lean and call('HMGET', job, 'state', 'attempts')
        or bare and call('HMGET', job, 'state', 'attempts', 'lane')
        or call('HMGET', job, 'state', 'attempts', 'lane', 'cancel', 'parent')
      live = row[1] == 'active'
      live = live and row[2] == attempt -- fence: this attempt holds it
      live = live and (fresh or tonumber(deadline) >= now) -- fence: the lease deadline has not passed
      out[i] = live and (row[4] and 2 or 1) or 0 -- fence: a cancel was asked: cancelled, not done
      if live then -- a nil stored in a table still makes a slot: only what is there
        won[#won + 1], seen[id] = i, true
        if row[3] then lanes[i] = row[3] end
        if row[5] then parents[i] = row[5] end
      end
    else
      out[i] = 0
    end
    if out[i] == 0 and not seen[id] then -- a resend of this call, whose first send landed?
      out[i] = earned(KEYS[i + 5], tok)
      if out[i] > 0 then seen[id] = true end
    end
  end
end
for s = 1, #won, 256 do -- writes, in slices: ZREM/ZADD take at most 256 members each
  local gone, done = {}, {}
  for w = s, math.min(s + 255, #won) do
    local i = won[w]
    local job, id, result = KEYS[i + 5], ARGV[3 * i], ARGV[3 * i + 2]
    gone[#gone + 1] = id
    if parents[i] then flow_told(KEYS[5], id, parents[i], out[i] == 2 and 'cancelled' or 'done') end
    if lanes[i] then release(KEYS[3], lanes[i], id) end
    if out[i] == 2 then
      ended(job, KEYS[2], id, now)
      call('HSET', job, 'fin', '2' .. tok)
    elseif keep == 0 then
      call('DEL', job)
    else
      call('HDEL', job, 'payload')
      if result == '' then call('HSET', job, 'state', 'done', 'fin', fin)
      else call('HSET', job, 'state', 'done', 'fin', fin, 'result', result) end
      done[#done + 1], done[#done + 2] = at, id
    end
  end
  call('ZREM', KEYS[1], unpack(gone))
  if #done > 0 then call('ZADD', KEYS[2], unpack(done)) end
  call('SPUBLISH', KEYS[5], table.concat(gone, ' '))
end
return out
