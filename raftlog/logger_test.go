package raftlog

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestRaftLoggerLevels checks that raft's routine per-group messages stay
// out of an Info log while its warnings and errors reach it: a node holds
// one raft group per partition, and at Info each group's election lines
// added up to thousands.
func TestRaftLoggerLevels(t *testing.T) {
	var buf bytes.Buffer
	l := newRaftLogger(hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &buf}))
	l.Info("1 became leader at term 2")
	l.Infof("%x became follower at term %d", 1, 3)
	l.Debugf("%x received MsgVoteResp", 1)
	if buf.Len() != 0 {
		t.Errorf("an Info logger printed raft's routine messages:\n%s", buf.String())
	}
	l.Warningf("%x stepped down: %s", 1, "lost quorum")
	l.Errorf("%x failed: %s", 1, "disk")
	out := buf.String()
	for _, want := range []string{"[WARN]  1 stepped down: lost quorum", "[ERROR] 1 failed: disk"} {
		if !strings.Contains(out, want) {
			t.Errorf("log does not contain %q:\n%s", want, out)
		}
	}

	buf.Reset()
	l = newRaftLogger(hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &buf}))
	l.Info("1 became leader at term 2")
	if !strings.Contains(buf.String(), "[DEBUG] 1 became leader at term 2") {
		t.Errorf("a Debug logger does not show raft's messages at debug:\n%s", buf.String())
	}
}
