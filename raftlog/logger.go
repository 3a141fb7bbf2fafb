package raftlog

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"
)

// raftLogger adapts hclog to raft's Logger. Raft's Fatal and Panic must not
// return; both panic, which the host turns into a stopped group.
//
// Raft's Info messages go to Debug: they are each group's routine life
// (elections, votes, "became leader", configuration applied), and a node
// holds a group per partition, so at Info a 1,024-partition topic wrote
// 11.5 k lines on start. Warnings and errors keep their level.
type raftLogger struct{ l hclog.Logger }

func newRaftLogger(l hclog.Logger) *raftLogger { return &raftLogger{l: l} }

func (r *raftLogger) Debug(v ...any)                 { r.l.Debug(fmt.Sprint(v...)) }
func (r *raftLogger) Debugf(format string, v ...any) { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r *raftLogger) Info(v ...any)                  { r.l.Debug(fmt.Sprint(v...)) }
func (r *raftLogger) Infof(format string, v ...any)  { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r *raftLogger) Warning(v ...any)               { r.l.Warn(fmt.Sprint(v...)) }
func (r *raftLogger) Warningf(format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...))
}
func (r *raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r *raftLogger) Errorf(format string, v ...any) { r.l.Error(fmt.Sprintf(format, v...)) }
func (r *raftLogger) Fatal(v ...any)                 { r.panic(fmt.Sprint(v...)) }
func (r *raftLogger) Fatalf(format string, v ...any) { r.panic(fmt.Sprintf(format, v...)) }
func (r *raftLogger) Panic(v ...any)                 { r.panic(fmt.Sprint(v...)) }
func (r *raftLogger) Panicf(format string, v ...any) { r.panic(fmt.Sprintf(format, v...)) }

func (r *raftLogger) panic(msg string) {
	r.l.Error("raft invariant broken", "error", msg)
	panic("raft: " + msg)
}

func unmarshal(b []byte, m proto.Message) error { return proto.Unmarshal(b, m) }
