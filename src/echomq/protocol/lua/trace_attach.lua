#!lua
-- name: trace_attach
-- summary: Keep the producer's trace context (a W3C traceparent) in a job's row, sent in the
--   same flush right after the admission. Sets it only on an existing row that has none:
--   never creates a row (a finished, deleted job stays deleted) and never replaces one.
-- KEYS[1] job: emq:{q}:job:<id>
-- KEYS[2] meta: emq:{q}:meta
-- ARGV[1] traceparent: the context, '' to store nothing
-- RETURNS: 1 stored | 0 not stored
-- ERRORS: EMQARG a traceparent that is not 55 characters; EMQKEYS keys not one queue's job
--   and meta; EMQVERSION another major version; nothing written
-- @include fence
local prefix = string.match(KEYS[1] or '', '^(emq:{[^}]*}:)job:JOB')
if not prefix or #KEYS ~= 2 or KEYS[2] ~= prefix .. 'meta' or #ARGV ~= 1 then
  return redis.error_reply('EMQKEYS a job key and its queue meta key, one argument')
end
if ARGV[1] ~= '' and #ARGV[1] ~= 55 then
  return redis.error_reply('EMQARG traceparent must be 55 characters')
end
local refused = fence(KEYS[2])
if refused then return refused end
if ARGV[1] == '' or redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
return redis.call('HSETNX', KEYS[1], 'traceparent', ARGV[1])
