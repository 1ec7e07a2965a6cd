#!lua flags=no-writes
-- name: search_rows
-- summary: The second step of a search window (docs/decisions/0037-search.md): of the
--   candidate jobs (ids a search window returned), those whose rows are still in the
--   state of the set walked (a cancelled row counts as done: it is kept in the done set)
--   and match the filters, with the fields a result line shows; never the payload. One
--   HMGET per candidate; the error filters look at the error's first line only ('Type:
--   message', at most about a thousand characters), so the work per candidate is bounded.
-- KEYS[1] set: emq:{q}:<pending|active|delayed|done|dead>
-- KEYS[2] meta: emq:{q}:meta
-- KEYS[3..] jobs: emq:{q}:job:<id> for each candidate, in ARGV[4..] order
-- ARGV[1] lane: the lane a job must be on, '' for any
-- ARGV[2] error_type: the type its error must name ('ValueError' matches 'ValueError: ...'), '' for any
-- ARGV[3] text: a text its error's first line must hold (plain, case-sensitive), '' for any
-- ARGV[4..] ids: the candidate ids
-- RETURNS: flat array, 5 per match: id, state, attempts, lane ('' for none), the error's
--   first line cut at 300 bytes ('' for none)
-- ERRORS: EMQKEYS keys not this queue's or not the ids'; EMQVERSION another major version
-- @include fence
-- @include shape
local bad = shape({false, 'meta'}, 3, 2, 3)
if bad then return bad end
local refused = fence(KEYS[2])
if refused then return refused end
local lane, kind, text = ARGV[1], ARGV[2], ARGV[3]
local walked = string.match(KEYS[1], ':([a-z]+)$')
local out = {}
for i = 4, #ARGV do
  local row = redis.call('HMGET', KEYS[i - 1], 'state', 'attempts', 'lane', 'error')
  local state = row[1]
  if (state == walked or (state == 'cancelled' and walked == 'done'))
      and (lane == '' or row[3] == lane) then
    local err = row[4] or ''
    local cut = string.find(err, '\n', 1, true)
    local head = cut and string.sub(err, 1, cut - 1) or err
    local ok = kind == '' or (string.sub(head, 1, #kind) == kind
      and (#head == #kind or string.sub(head, #kind + 1, #kind + 1) == ':'))
    if ok and (text == '' or string.find(head, text, 1, true)) then
      out[#out + 1] = ARGV[i]
      out[#out + 1] = state
      out[#out + 1] = row[2] or '0'
      out[#out + 1] = row[3] or ''
      out[#out + 1] = string.sub(head, 1, 300)
    end
  end
end
return out
