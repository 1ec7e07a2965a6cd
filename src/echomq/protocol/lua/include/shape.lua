-- shape(names, nargs, jobs, ids): the EMQKEYS error reply unless KEYS and ARGV have the
-- contract's shape, else nil. KEYS[i] must be emq:{q}:<names[i]> (names[i] false: any of
-- the six state sets, or the expiring index, which peek reads for the expiry reaper).
-- Without jobs: exactly #names keys and nargs args. With jobs: at
-- least nargs args, and (with ids) KEYS[jobs + j] must be emq:{q}:job:<ARGV[ids + j]>, one job key
-- per id. Reads no key.
local STATE_SETS = {pending = true, active = true, delayed = true, done = true, dead = true,
                    expired = true, expiring = true}
local function shape(names, nargs, jobs, ids)
  if #KEYS < #names or #ARGV < nargs or (jobs == nil and (#KEYS ~= #names or #ARGV ~= nargs)) then
    return redis.error_reply('EMQKEYS ' .. #KEYS .. ' keys and ' .. #ARGV .. ' args do not fit the contract')
  end
  local prefix = string.match(KEYS[1], '^emq:{[^}]*}:')
  if not prefix then return redis.error_reply('EMQKEYS KEYS[1] is not a queue key') end
  for i = 1, #names do
    local ok = KEYS[i] == prefix .. (names[i] or '')
    if names[i] == false then ok = STATE_SETS[string.sub(KEYS[i], #prefix + 1)] == true end
    if not ok then
      return redis.error_reply('EMQKEYS KEYS[' .. i .. '] is not ' .. prefix .. tostring(names[i]))
    end
  end
  if jobs and ids then
    if #KEYS - jobs ~= #ARGV - ids then
      return redis.error_reply('EMQKEYS one job key per id expected')
    end
    local jp = prefix .. 'job:'
    for j = 1, #ARGV - ids do
      if KEYS[jobs + j] ~= jp .. ARGV[ids + j] then
        return redis.error_reply('EMQKEYS KEYS[' .. (jobs + j) .. '] is not the job of ARGV[' .. (ids + j) .. ']')
      end
    end
  end
  return nil
end
