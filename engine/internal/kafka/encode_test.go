package kafka

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRecordBodySize checks the computed length field against kmsg's own
// encoding, for the sizes where varints grow a byte.
func TestRecordBodySize(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 127, 128, 8191, 8192, 1 << 20} {
		for _, r := range []kmsg.Record{
			{Value: bytes.Repeat([]byte("v"), n)},
			{Key: []byte{}, Value: nil, OffsetDelta: int32(n)},
			{Key: bytes.Repeat([]byte("k"), n), Value: []byte{1}, Headers: []kmsg.Header{{Key: string(bytes.Repeat([]byte("h"), n)), Value: nil}, {Key: "", Value: []byte{}}}},
		} {
			enc := r.AppendTo(nil) // with Length 0: one byte
			if got, want := recordBodySize(&r), len(enc)-1; got != want {
				t.Fatalf("n=%d: computed %d, encoded %d", n, got, want)
			}
		}
	}
}
