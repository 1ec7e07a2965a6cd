#!lua flags=allow-oom
-- name: purge
-- summary: Delete the candidate rows of a finished state (done or dead) that entered it at
--   least min_age_ms ago on the server clock: retention and purge are this one script.
-- KEYS[1] set: emq:{q}:done or emq:{q}:dead
-- KEYS[2..] jobs: emq:{q}:job:<id> for each candidate, in ARGV[3..] order
-- ARGV[1] state: 'done' or 'dead', the state the rows must be in
-- ARGV[2] min_age_ms: 0 deletes regardless of age
-- ARGV[3..] ids: the candidate ids
-- RETURNS: the number of rows deleted
-- ERRORS: EMQARG a malformed argument; nothing written
-- @include now
local age = tonumber(ARGV[2])
if (ARGV[1] ~= 'done' and ARGV[1] ~= 'dead') or not age or age < 0 then
  return redis.error_reply('EMQARG state must be done or dead, min_age_ms >= 0')
end
local cutoff = now_ms() - age
local removed = 0
for i = 3, #ARGV do
  local id, job = ARGV[i], KEYS[i - 1]
  local at = redis.call('ZSCORE', KEYS[1], id)
  if at and tonumber(at) <= cutoff then
    redis.call('ZREM', KEYS[1], id)
    if redis.call('HGET', job, 'state') == ARGV[1] then
      redis.call('DEL', job)
    end
    removed = removed + 1
  end
end
return removed
