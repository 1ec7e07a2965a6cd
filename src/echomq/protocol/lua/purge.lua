#!lua flags=allow-oom
-- name: purge
-- summary: Delete the candidate rows of a finished state (done, dead or expired) that entered it at
--   least min_age_ms ago on the server clock: retention and purge are this one script.
--   The done set also holds cancelled rows (docs/decisions/0023): they go with it.
-- KEYS[1] set: emq:{q}:done, emq:{q}:dead or emq:{q}:expired, the set named by ARGV[1]
-- KEYS[2] meta: emq:{q}:meta
-- KEYS[3..] jobs: emq:{q}:job:<id> for each candidate, in ARGV[3..] order
-- ARGV[1] state: 'done', 'dead' or 'expired', the state the rows must be in
-- ARGV[2] min_age_ms: 0..31622400000; 0 deletes regardless of age
-- ARGV[3..] ids: the candidate ids
-- RETURNS: {rows deleted, entries left in the set}
-- ERRORS: EMQARG a malformed argument; EMQKEYS job keys not the ids' or not this queue's;
--   EMQVERSION another major version; nothing written
-- @include now
-- @include fence
-- @include shape
if ARGV[1] ~= 'done' and ARGV[1] ~= 'dead' and ARGV[1] ~= 'expired' then
  return redis.error_reply('EMQARG state must be done, dead or expired')
end
local bad = shape({ARGV[1], 'meta'}, 2, 2, 2)
if bad then return bad end
local age = tonumber(ARGV[2])
if not age or age < 0 or age > 31622400000 or age ~= math.floor(age) then
  return redis.error_reply('EMQARG min_age_ms must be an integer in 0..31622400000')
end
local refused = fence(KEYS[2])
if refused then return refused end
local cutoff = now_ms() - age
local removed = 0
for i = 3, #ARGV do
  local id, job = ARGV[i], KEYS[i]
  local at = redis.call('ZSCORE', KEYS[1], id)
  if at and tonumber(at) <= cutoff then -- threshold: old enough
    redis.call('ZREM', KEYS[1], id)
    local state = redis.call('HGET', job, 'state')
    if state == ARGV[1] or (state == 'cancelled' and ARGV[1] == 'done') then
      redis.call('DEL', job)
    end
    removed = removed + 1
  end
end
return {removed, redis.call('ZCARD', KEYS[1])}
