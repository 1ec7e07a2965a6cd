#!lua
-- name: trace_attach
-- summary: Keep the producer's trace context (a W3C traceparent) in a job's row, sent in the
--   same flush right after the admission. Sets it only on an existing row that has none:
--   never creates a row (a finished, deleted job stays deleted) and never replaces one.
-- KEYS[1] job: emq:{q}:job:<id>
-- ARGV[1] traceparent: the context, '' to store nothing
-- RETURNS: 1 stored | 0 not stored
-- ERRORS: EMQARG a traceparent that is not 55 characters
if ARGV[1] == '' or redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if #ARGV[1] ~= 55 then
  return redis.error_reply('EMQARG traceparent must be 55 characters')
end
return redis.call('HSETNX', KEYS[1], 'traceparent', ARGV[1])
