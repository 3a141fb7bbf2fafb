package filter

// Log writes msg as one line to the server log, through the host's
// rewind.log import (rate-limited and truncated by the host). It is for
// rare events (a bad config, a failure): it is not free, and a replay that
// logs per record will see most lines dropped. Natively it writes to
// standard error, or to Harness.Logs while a Harness exists.
func Log(msg string) {
	if logHook != nil {
		logHook(msg)
		return
	}
	writeLog(msg)
}

// logHook, when set (by NewHarness), receives every Log line instead of
// the host.
var logHook func(msg string)
