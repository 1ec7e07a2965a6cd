-- AGE: virtual-time ticks one priority level is worth (echomq.protocol.gate.PRIORITY_AGE; a test
-- checks they agree). A job of level p scores its fair-queuing tag - p * AGE (pend).
local AGE = 1000
