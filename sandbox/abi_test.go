package sandbox

import (
	"encoding/binary"
	"testing"
)

// FuzzDecodeOutputs feeds decodeOutputs what a hostile guest could write:
// it returns an error or outputs that hold the ABI's promises, and never
// panics.
func FuzzDecodeOutputs(f *testing.F) {
	le := binary.LittleEndian
	keep := func(b []byte, i uint32) []byte { return append(le.AppendUint32(b, i), actionKeep) }
	repl := func(b []byte, i uint32, k, v string, hs ...string) []byte {
		b = append(le.AppendUint32(b, i), actionReplace)
		b = append(le.AppendUint32(b, uint32(len(k))), k...)
		b = append(le.AppendUint32(b, uint32(len(v))), v...)
		b = le.AppendUint32(b, uint32(len(hs)/2))
		for _, h := range hs {
			b = append(le.AppendUint32(b, uint32(len(h))), h...)
		}
		return b
	}
	f.Add([]byte{}, 3, 16)
	f.Add(keep(keep(nil, 0), 2), 3, 16)
	f.Add(repl(keep(nil, 0), 1, "k", "v", "h", "x"), 2, 16)
	f.Add(keep(keep(nil, 1), 0), 2, 16)
	f.Add(keep(keep(keep(nil, 0), 0), 0), 1, 2)
	f.Add(append(le.AppendUint32(nil, 0), actionReplace, 0xff, 0xff, 0xff, 0xff), 1, 16)
	f.Add(append(repl(nil, 0, "", ""), 0xff, 0xff, 0xff, 0x7f), 1, 16)
	f.Fuzz(func(t *testing.T, out []byte, count, maxPer int) {
		if count < 0 || count > 1<<20 || maxPer < 1 || maxPer > 64 {
			return
		}
		outs, err := decodeOutputs(nil, out, count, maxPer)
		if err != nil {
			e, ok := err.(*Error)
			if !ok || (e.Kind != KindOutput && e.Kind != KindLimit) {
				t.Fatalf("error %v (%T), want a KindOutput or KindLimit *Error", err, err)
			}
			if len(outs) != 0 {
				t.Fatalf("%d outputs returned with an error", len(outs))
			}
			return
		}
		last, run := -1, 0
		for _, o := range outs {
			if o.Index < 0 || o.Index >= count || o.Index < last {
				t.Fatalf("output index %d (count %d, previous %d)", o.Index, count, last)
			}
			if o.Index == last {
				run++
			} else {
				last, run = o.Index, 1
			}
			if run > maxPer {
				t.Fatalf("%d outputs for input %d, limit %d", run, o.Index, maxPer)
			}
			if !o.Replaced && (o.Key != nil || o.Value != nil || o.Headers != nil) {
				t.Fatalf("a kept output carries contents: %+v", o)
			}
		}
		// Outputs own their bytes: scribbling on the guest's buffer changes
		// nothing.
		before := make([]Output, len(outs))
		copy(before, outs)
		keys := make([]string, len(outs))
		for i, o := range outs {
			keys[i] = string(o.Key) + "\x00" + string(o.Value)
		}
		for i := range out {
			out[i] ^= 0xff
		}
		for i, o := range outs {
			if got := string(o.Key) + "\x00" + string(o.Value); got != keys[i] {
				t.Fatalf("output %d aliases the guest buffer", i)
			}
		}
	})
}

// TestBatchLayout checks the input encoding against the ABI's byte layout.
func TestBatchLayout(t *testing.T) {
	var b Batch
	b.Add(7, -3, []byte("k"), []byte("vv"), 1)
	b.AddHeader([]byte("h"), []byte("x"))
	b.Add(8, 9, nil, nil, 0)
	le := binary.LittleEndian
	var want []byte
	rec := func(off uint64, tm int64, k, v string, hs ...string) {
		var body []byte
		body = le.AppendUint64(body, off)
		body = le.AppendUint64(body, uint64(tm))
		body = append(le.AppendUint32(body, uint32(len(k))), k...)
		body = append(le.AppendUint32(body, uint32(len(v))), v...)
		body = le.AppendUint32(body, uint32(len(hs)/2))
		for _, h := range hs {
			body = append(le.AppendUint32(body, uint32(len(h))), h...)
		}
		want = append(le.AppendUint32(want, uint32(len(body))), body...)
	}
	rec(7, -3, "k", "vv", "h", "x")
	rec(8, 9, "", "")
	if got := b.span(0, b.Len()); string(got) != string(want) {
		t.Fatalf("batch bytes\n got % x\nwant % x", got, want)
	}
	if b.Size() != len(want) || EncodedSize([]byte("k"), []byte("vv"), []Header{{[]byte("h"), []byte("x")}})+EncodedSize(nil, nil, nil) != len(want) {
		t.Errorf("Size %d, EncodedSize sum, want %d", b.Size(), len(want))
	}
}
