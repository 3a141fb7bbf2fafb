//go:build !race

package sandbox_test

// TestExamples runs guest code, which the race detector cannot see, over
// one goroutine at a time: it is built without -race, and .ci/run runs the
// sandbox's tests without -race first (see there). The host's concurrent
// paths run under -race in the other tests.

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/rewind-io/rewind/sandbox"
)

// TestExamples runs every example, in both languages, over the corpus and
// checks the outputs against the same functions written in Go.
func TestExamples(t *testing.T) {
	r := newRuntime(t, sandbox.Limits{})
	recs := corpus(600, 1)
	for _, ex := range examples() {
		var want []outRec
		for i, rc := range recs {
			keep, replaced, value := ex.want(rc)
			switch {
			case !keep:
			case replaced:
				want = append(want, outRec{Index: i, Replaced: true, Key: rc.key, Value: value, Headers: rc.headers})
			default:
				want = append(want, outRec{Index: i})
			}
		}
		for _, lang := range []string{"go", "as"} {
			t.Run(fmt.Sprintf("%s/%s/%s", lang, ex.name, ex.config), func(t *testing.T) {
				m := compile(t, r, module(t, lang, ex.name))
				f := m.NewFilter([]byte(ex.config))
				// Several batch sizes: outputs do not depend on batching.
				for _, size := range []int{1, 7, 600} {
					var got []sandbox.Output
					for i := 0; i < len(recs); i += size {
						j := min(len(recs), i+size)
						outs, err := f.Run(context.Background(), batchOf(recs[i:j]), nil)
						if err != nil {
							t.Fatalf("batch %d: %v", size, err)
						}
						for _, o := range outs {
							o.Index += i
							got = append(got, o)
						}
					}
					if diff := cmp.Diff(want, normalize(got), cmpopts.EquateEmpty()); diff != "" {
						t.Fatalf("batches of %d: outputs (-want +got):\n%s", size, diff)
					}
				}
			})
		}
	}
}
