-- earned(job, tok): the verdict a finish (complete, complete_batch, retry) answers where its
-- fence refuses it: the verdict its own first send earned when the row's 'fin' says that
-- send was this call (same token: a resend after a lost reply), else 0 (stale). 'fin' is
-- the verdict digit then the finishing call's token, written by that call with the row;
-- only the row's last finish is kept. One HGET, on the refused path only
-- (docs/protocol.md, "Call tokens").
local function earned(job, tok)
  if tok == '' then return 0 end
  local fin = redis.call('HGET', job, 'fin')
  if fin and string.sub(fin, 2) == tok then return tonumber(string.sub(fin, 1, 1)) end
  return 0
end
