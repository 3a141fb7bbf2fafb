package fastpath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"reflect"
	"testing"
)

// decodeAll reads one frame from b as a peer would.
func decodeAll(b []byte, max int) (Frame, error) {
	var hdr [HeaderLen]byte
	r := bytes.NewReader(b)
	n, id, k, err := ReadHeader(r, &hdr, max)
	if err != nil {
		return Frame{}, err
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return Frame{}, err
	}
	return Decode(id, k, p)
}

func TestFramesRoundTrip(t *testing.T) {
	h := http.Header{"Content-Type": {"application/proto"}, "Authorization": {"Bearer x"}, "X-Two": {"a", "b"}}
	f, err := decodeAll(AppendRequest(nil, 7, "/rewind.v1.PublishService/Publish", h, []byte("body")), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != 7 || f.Kind != KindRequest || f.Path != "/rewind.v1.PublishService/Publish" || string(f.Body) != "body" || !reflect.DeepEqual(f.Header, h) {
		t.Fatalf("request came back as %+v", f)
	}
	f, err = decodeAll(AppendResponse(nil, 9, 429, http.Header{"X": {""}}, nil), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != 9 || f.Kind != KindResponse || f.Status != 429 || len(f.Body) != 0 || f.Header.Get("X") != "" || len(f.Header["X"]) != 1 {
		t.Fatalf("response came back as %+v", f)
	}
	for _, k := range []Kind{KindCancel, KindGoAway} {
		f, err = decodeAll(AppendControl(nil, 3, k), 1<<20)
		if err != nil || f.ID != 3 || f.Kind != k {
			t.Fatalf("control %d came back as %+v, %v", k, f, err)
		}
	}
}

// TestBadFrames: every malformed frame is an ErrMalformed, never a panic
// nor a frame.
func TestBadFrames(t *testing.T) {
	good := AppendRequest(nil, 1, "/p", http.Header{"A": {"b"}}, []byte("x"))
	withLen := func(b []byte, l uint32) []byte {
		b = bytes.Clone(b)
		binary.BigEndian.PutUint32(b, l)
		return b
	}
	cases := map[string][]byte{
		"over the limit":      withLen(good, 1<<31),
		"shorter than a head": withLen(good, 3),
		"unknown kind":        append(withLen(good[:9], 5), 0)[:9],
		"payload on cancel":   append(withLen(AppendControl(nil, 1, KindCancel), 6), 'x'),
		"truncated path":      {0, 0, 0, 7, 0, 0, 0, 1, 1, 50, 'a'},
		"bad status":          AppendResponse(nil, 1, 42, nil, nil),
		"header name":         AppendRequest(nil, 1, "/p", http.Header{"Bad Name": {"v"}}, nil),
		"header value":        AppendRequest(nil, 1, "/p", http.Header{"A": {"v\r\nInjected: 1"}}, nil),
	}
	cases["unknown kind"][8] = 9
	many := http.Header{}
	for i := range MaxHeaders + 1 {
		many.Add("H"+string(rune('a'+i%26))+string(rune('a'+i/26)), "v")
	}
	cases["too many headers"] = AppendRequest(nil, 1, "/p", many, nil)
	cases["header bytes"] = AppendRequest(nil, 1, "/p", http.Header{"A": {string(bytes.Repeat([]byte("v"), MaxHeaderBytes+1))}}, nil)
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := decodeAll(b, 1<<20)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("decoded %+v, %v; want ErrMalformed", f, err)
			}
		})
	}
}

// FuzzDecode: no input makes the decoder panic, and what it accepts
// encodes back to a frame that decodes the same.
func FuzzDecode(f *testing.F) {
	f.Add(AppendRequest(nil, 1, "/rewind.v1.TopicService/DescribeTopic", http.Header{"Content-Type": {"application/proto"}}, []byte{10, 1, 't'}))
	f.Add(AppendResponse(nil, 2, 200, http.Header{"Content-Type": {"application/proto"}}, []byte{1, 2, 3}))
	f.Add(AppendControl(nil, 3, KindGoAway))
	f.Add([]byte{0, 0, 0, 5, 0, 0, 0, 1, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeAll(b, 1<<20)
		if err != nil {
			return
		}
		var again []byte
		switch fr.Kind {
		case KindRequest:
			again = AppendRequest(nil, fr.ID, fr.Path, fr.Header, fr.Body)
		case KindResponse:
			again = AppendResponse(nil, fr.ID, fr.Status, fr.Header, fr.Body)
		default:
			again = AppendControl(nil, fr.ID, fr.Kind)
		}
		fr2, err := decodeAll(again, 1<<20)
		if err != nil {
			t.Fatalf("%+v encoded to a frame that does not decode: %v", fr, err)
		}
		if fr2.ID != fr.ID || fr2.Kind != fr.Kind || fr2.Path != fr.Path || fr2.Status != fr.Status || !bytes.Equal(fr2.Body, fr.Body) || len(fr2.Header) != len(fr.Header) {
			t.Fatalf("%+v came back as %+v", fr, fr2)
		}
	})
}
