package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/internal/wasmgen"
	"github.com/rewind-io/rewind/scenarios/history"
	"github.com/rewind-io/rewind/sdk/client"
)

// bombs are filter modules that cannot finish a replay, as Go sources of
// the keep function (and what it needs), each built into the project `rewind
// plugin new` writes.
var bombs = []struct{ name, what, src string }{
	{"loop", "a filter that never returns", `
func keep(r filter.Record) bool {
	for n := 0; ; n++ {
		if n < 0 {
			return len(r.Key) > 0
		}
	}
}`},
	{"memory", "a filter that allocates without end", `
var sink [][]byte

func keep(r filter.Record) bool {
	for {
		sink = append(sink, make([]byte, 1<<20))
		if len(sink) < 0 {
			return len(r.Key) > 0
		}
	}
}`},
	{"recursion", "a filter that recurses without end", `
func deeper(n int) int { return deeper(n+1) + 1 }

func keep(r filter.Record) bool { return deeper(len(r.Key)) > 0 }`},
}

// bombMain is the module's main.go around a bomb's keep.
const bombMain = `package main

import "github.com/rewind-io/rewind/sdk/guest/filter"

func init() {
	filter.OnInit(func([]byte) error { return nil })
	filter.Filter(keep)
}
%s

func main() {}
`

// setupBombs builds every bomb from source and registers it as
// chaos-bomb-NAME.
func setupBombs(ctx context.Context, c *client.Client, dir string) error {
	for _, b := range bombs {
		err := buildPlugin(ctx, c, filepath.Join(dir, "bomb-"+b.name), "chaos-bomb-"+b.name, "the scenario runner's "+b.what,
			func([]byte) ([]byte, error) { return fmt.Appendf(nil, bombMain, b.src), nil })
		if err != nil {
			return err
		}
	}
	return nil
}

// bomber replays random non-empty partitions of topic through random
// bombs, and uploads a random upload bomb after each, until ctx ends; each
// replay and upload must fail, and its answer is recorded as a probe.
func bomber(ctx context.Context, c *client.Client, rec *recorder, topic string, partitions uint32, rng *rand.Rand) {
	for ctx.Err() == nil {
		b := bombs[rng.IntN(len(bombs))]
		p := uint32(rng.IntN(int(partitions)))
		_, infos, err := c.DescribeTopic(ctx, topic)
		if err != nil || int(p) >= len(infos) || infos[p].EndOffset == infos[p].LogStartOffset {
			time.Sleep(100 * time.Millisecond) // nothing to filter yet
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		sub, err := c.Subscribe(rctx, topic, client.Partitions(p), client.From(client.Earliest()), client.Until(client.End()),
			client.Filter("chaos-bomb-"+b.name, nil))
		if err == nil {
			for _, err = range sub.Records() {
				if err != nil {
					break
				}
			}
			sub.Close()
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		code := "ok"
		if err != nil {
			code = connect.CodeOf(err).String()
		}
		rec.probe(history.Probe{RPC: "rewind.v1.SubscribeService/Subscribe", Input: "replay through " + b.what, Code: code, At: time.Now(), MustFail: true})
		uploadBomb(ctx, c, rec, rng)
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond): // one bomb at a time
		}
	}
}

// uploadBombs are modules the server must refuse at upload, before it
// compiles a byte of them, built by hand: what each is and the module.
var uploadBombs = []struct {
	what string
	wasm func() []byte
}{
	{"a table bomb (a table that may grow without a maximum)", func() []byte {
		return abiModule(func(m *wasmgen.Module) {
			tab := m.Table(wasmgen.FuncRef, 1, 0, false)
			grow := m.Type(nil, []wasmgen.ValType{wasmgen.I32})
			m.ExportFunc("grow", m.Func(grow, nil, wasmgen.Body(wasmgen.OpRefNull, wasmgen.FuncRef, wasmgen.I32Const(1<<30), wasmgen.FC(wasmgen.FCTableGrow), tab, wasmgen.OpEnd)))
		})
	}},
	{"a table bomb (2^28 entries declared)", func() []byte {
		return abiModule(func(m *wasmgen.Module) { m.Table(wasmgen.FuncRef, 1<<28, 0, false) })
	}},
	{"a compile bomb (100,001 functions)", func() []byte {
		return abiModule(func(m *wasmgen.Module) {
			void := m.Type(nil, nil)
			for range 100_001 {
				m.Func(void, nil, []byte{wasmgen.OpEnd})
			}
		})
	}},
}

// abiModule is a minimal filter module (it drops every record), with
// extra's additions.
func abiModule(extra func(m *wasmgen.Module)) []byte {
	return wasmgen.ABIModule(2, wasmgen.Body(wasmgen.I32Const(0), wasmgen.OpEnd), extra)
}

// uploadBomb uploads a random upload bomb; it must be refused.
func uploadBomb(ctx context.Context, c *client.Client, rec *recorder, rng *rand.Rand) {
	b := uploadBombs[rng.IntN(len(uploadBombs))]
	uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, _, err := c.UploadPlugin(uctx, "chaos-upload-bomb", b.wasm(), b.what)
	cancel()
	if ctx.Err() != nil {
		return
	}
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	rec.probe(history.Probe{RPC: "rewind.v1.PluginService/UploadPlugin", Input: "upload " + b.what, Code: code, At: time.Now(), MustFail: true})
}
