package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type field struct{ Key, Value string }

func fields(t *testing.T, in string) ([]field, error) {
	t.Helper()
	var out []field
	it := Fields([]byte(in))
	for it.Next() {
		out = append(out, field{string(it.Key()), string(it.Value())})
		if got := in[it.KeyOffset() : it.KeyOffset()+len(it.Key())+2]; got != `"`+string(it.Key())+`"` {
			t.Errorf("KeyOffset: %q", got)
		}
		if got := in[it.ValueOffset() : it.ValueOffset()+len(it.Value())]; got != string(it.Value()) {
			t.Errorf("ValueOffset: %q", got)
		}
	}
	return out, it.Err()
}

func TestFields(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []field
		err  error
	}{
		{in: `{}`},
		{in: " \t\r\n{ \n} \n"},
		{in: `{"a":1}`, want: []field{{"a", "1"}}},
		{in: `{ "a" : "x" , "b":[1, {"c":null}] ,"a":true}`, want: []field{{"a", `"x"`}, {"b", `[1, {"c":null}]`}, {"a", "true"}}},
		{in: `{"k\"ey":"v\\\"","":{}}`, want: []field{{`k\"ey`, `"v\\\""`}, {"", "{}"}}},
		{in: `{"n":-0.5e+10,"m":0,"o":12E-3}`, want: []field{{"n", "-0.5e+10"}, {"m", "0"}, {"o", "12E-3"}}},
		{in: "{\"u\":\"\\u00e9\xff\"}", want: []field{{"u", "\"\\u00e9\xff\""}}},
		{in: ``, err: ErrSyntax},
		{in: `  `, err: ErrSyntax},
		{in: `[1]`, err: ErrNotObject},
		{in: `"s"`, err: ErrNotObject},
		{in: `{`, err: ErrSyntax},
		{in: `{"a":1`, err: ErrSyntax},
		{in: `{"a":1,}`, err: ErrSyntax, want: []field{{"a", "1"}}},
		{in: `{"a":1}x`, err: ErrSyntax, want: []field{{"a", "1"}}},
		{in: `{"a":1}{}`, err: ErrSyntax, want: []field{{"a", "1"}}},
		{in: `{"a" 1}`, err: ErrSyntax},
		{in: `{a:1}`, err: ErrSyntax},
		{in: `{"a":01}`, err: ErrSyntax},
		{in: `{"a":+1}`, err: ErrSyntax},
		{in: `{"a":1.}`, err: ErrSyntax},
		{in: `{"a":.5}`, err: ErrSyntax},
		{in: `{"a":1e}`, err: ErrSyntax},
		{in: `{"a":-}`, err: ErrSyntax},
		{in: `{"a":tru}`, err: ErrSyntax},
		{in: `{"a":nulll}`, err: ErrSyntax},
		{in: `{"a":"\x"}`, err: ErrSyntax},
		{in: `{"a":"\u12g4"}`, err: ErrSyntax},
		{in: "{\"a\":\"\x01\"}", err: ErrSyntax},
		{in: `{"a":[1,]}`, err: ErrSyntax},
		{in: `{"a":[1 2]}`, err: ErrSyntax},
		{in: `{"a":{"b"}}`, err: ErrSyntax},
		{in: `{"a":1,"b":}`, err: ErrSyntax, want: []field{{"a", "1"}}},
	} {
		got, err := fields(t, tc.in)
		if !errors.Is(err, tc.err) {
			t.Errorf("%q: err %v, want %v", tc.in, err, tc.err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q: fields (-want +got):\n%s", tc.in, diff)
		}
		if ValidObject([]byte(tc.in)) != (tc.err == nil) {
			t.Errorf("%q: ValidObject disagrees with Fields", tc.in)
		}
	}
}

func TestZeroIter(t *testing.T) {
	var it Iter
	if it.Next() || !errors.Is(it.Err(), ErrSyntax) {
		t.Fatalf("zero Iter: Next true or err %v", it.Err())
	}
}

func TestDepthLimitMatchesEncodingJSON(t *testing.T) {
	for _, depth := range []int{9999, 10000, 10001} {
		// The top-level object is depth 1; depth-1 arrays inside it.
		in := `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
		if got, want := ValidObject([]byte(in)), json.Valid([]byte(in)); got != want {
			t.Errorf("depth %d: ValidObject %v, encoding/json %v", depth, got, want)
		}
		in = `{"a":` + strings.Repeat(`{"b":`, depth-1) + "1" + strings.Repeat("}", depth-1) + `}`
		if got, want := ValidObject([]byte(in)), json.Valid([]byte(in)); got != want {
			t.Errorf("depth %d (objects): ValidObject %v, encoding/json %v", depth, got, want)
		}
	}
}

func TestFind(t *testing.T) {
	in := []byte(`{"type":"order.created","id":7,"type":"second"}`)
	s, e, err := Find(in, "type")
	if err != nil || string(in[s:e]) != `"order.created"` {
		t.Fatalf("Find type: %d %d %v", s, e, err)
	}
	if !StringEquals(in[s:e], "order.created") || StringEquals(in[s:e], "order") {
		t.Fatal("StringEquals")
	}
	if s, e, err := Find(in, "missing"); s != -1 || e != -1 || err != nil {
		t.Fatalf("Find missing: %d %d %v", s, e, err)
	}
	if s, e, err := Find([]byte(`{"type":"x",`), "type"); s != -1 || e != -1 || !errors.Is(err, ErrSyntax) {
		t.Fatalf("Find in broken object: %d %d %v", s, e, err)
	}
	for _, v := range []string{``, `"`, `1`, `"a`, `a"`, `null`} {
		if StringEquals([]byte(v), "a") {
			t.Errorf("StringEquals(%q, a)", v)
		}
	}
	if !StringEquals([]byte(`""`), "") || StringEquals([]byte(`"\u0061"`), "a") {
		t.Error("StringEquals on empty or escaped strings")
	}
}

func TestDecoders(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{in: `"plain"`, want: "plain"},
		{in: `"a\"b\\c\/d\b\f\n\r\t"`, want: "a\"b\\c/d\b\f\n\r\t"},
		{in: `"\u00e9\u00E9"`, want: "éé"},
		{in: `"\ud83d\ude00"`, want: "😀"},
		{in: `"\ud83d"`, want: "\uFFFD"},
		{in: `"\ud83dx"`, want: "\uFFFDx"},
		{in: `"\ude00\ud83d\ude00"`, want: "\uFFFD😀"},
		{in: "\"\xff\"", want: "\uFFFD"},
		{in: `1`, err: ErrType},
		{in: `"a`, err: ErrSyntax},
		{in: ` "a"`, err: ErrSyntax},
		{in: ``, err: ErrSyntax},
	} {
		got, err := String([]byte(tc.in))
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("String(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	for _, tc := range []struct {
		in   string
		want uint64
		err  error
	}{
		{in: `0`}, {in: `10`, want: 10}, {in: `18446744073709551615`, want: 1<<64 - 1},
		{in: `18446744073709551616`, err: ErrType}, {in: `-1`, err: ErrType}, {in: `1.0`, err: ErrType},
		{in: `1e1`, err: ErrType}, {in: `"1"`, err: ErrType}, {in: `01`, err: ErrSyntax}, {in: ``, err: ErrSyntax},
	} {
		got, err := Uint([]byte(tc.in))
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("Uint(%q) = %d, %v; want %d, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	for _, tc := range []struct {
		in   string
		want []string
		err  error
	}{
		{in: `[]`, want: []string{}},
		{in: `[ "id" , "ty\u0070e" ]`, want: []string{"id", "type"}},
		{in: `["a",1]`, err: ErrType},
		{in: `{}`, err: ErrType},
		{in: `["a",]`, err: ErrSyntax},
	} {
		got, err := Strings([]byte(tc.in))
		if !errors.Is(err, tc.err) {
			t.Errorf("Strings(%q): err %v, want %v", tc.in, err, tc.err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Strings(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	in := []byte(`{"id":"0001","type":"order.created","user":{"email":"a@b.c","tags":[1,2.5,true,null]},"note":"caf\u00e9"}`)
	allocs := testing.AllocsPerRun(100, func() {
		s, e, err := Find(in, "type")
		if err != nil || !StringEquals(in[s:e], "order.created") || !ValidObject(in) {
			t.Fatal("unexpected result")
		}
		it := Fields(in)
		for it.Next() {
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run, want 0", allocs)
	}
}

// FuzzFields checks Fields, Find and ValidObject against encoding/json: the
// same inputs are valid objects, and the keys and raw values agree.
func FuzzFields(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"a":"x","b":[1,{"c":null}],"a":true}`, ` {"k\"":"\u00e9\ud83d\ude00"} `,
		`{"n":-0.5e+10,"o":{"p":[[],{}]}}`, `[1]`, `{"a":1,}`, "{\"a\":\"\xff\"}", `{"a":01}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		trimmed := bytes.TrimLeft(in, " \t\r\n")
		wantValid := json.Valid(in) && len(trimmed) > 0 && trimmed[0] == '{'
		if got := ValidObject(in); got != wantValid {
			t.Fatalf("ValidObject(%q) = %v, encoding/json says %v", in, got, wantValid)
		}
		var got []field
		it := Fields(in)
		for it.Next() {
			key, err := String(in[it.KeyOffset() : it.KeyOffset()+len(it.Key())+2])
			if err != nil {
				t.Fatalf("key %q of %q: %v", it.Key(), in, err)
			}
			got = append(got, field{key, string(it.Value())})
		}
		if (it.Err() == nil) != wantValid {
			t.Fatalf("Fields(%q): err %v, valid %v", in, it.Err(), wantValid)
		}
		if !wantValid {
			return
		}
		want := decodeFields(t, in)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Fields(%q) (-encoding/json +jsonscan):\n%s", in, diff)
		}
		if len(got) > 0 {
			s, e, err := Find(in, string(fieldKeyRaw(in)))
			if err != nil || s < 0 || string(in[s:e]) != got[0].Value {
				t.Fatalf("Find first key of %q: %d %d %v", in, s, e, err)
			}
		}
	})
}

// fieldKeyRaw is the raw first key of a valid, non-empty object.
func fieldKeyRaw(in []byte) []byte {
	it := Fields(in)
	it.Next()
	return it.Key()
}

// decodeFields lists the top-level fields of a valid object with
// encoding/json, in order and with duplicates.
func decodeFields(t *testing.T, in []byte) []field {
	dec := json.NewDecoder(bytes.NewReader(in))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var out []field
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		out = append(out, field{k.(string), string(bytes.Trim(raw, " \t\r\n"))})
	}
	return out
}

// FuzzDecoders checks String and Uint against encoding/json, and that
// Strings never panics.
func FuzzDecoders(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\ud83d"`, "\"\xff\xfe\"", `12`, `-1`, `1e3`, `["a","b"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want string
		jerr := json.Unmarshal(in, &want)
		exact := len(in) > 0 && in[0] == '"' && in[len(in)-1] == '"'
		got, err := String(in)
		if err == nil && (jerr != nil || got != want) {
			t.Fatalf("String(%q) = %q; encoding/json %q, %v", in, got, want, jerr)
		}
		if err != nil && jerr == nil && exact {
			t.Fatalf("String(%q): %v; encoding/json %q", in, err, want)
		}
		var wantN uint64
		jerr = json.Unmarshal(in, &wantN)
		n, err := Uint(in)
		if err == nil && (jerr != nil || n != wantN) {
			t.Fatalf("Uint(%q) = %d; encoding/json %d, %v", in, n, wantN, jerr)
		}
		if err != nil && jerr == nil && len(in) > 0 && isDigit(in[0]) && isDigit(in[len(in)-1]) && !bytes.ContainsAny(in, ".eE") {
			t.Fatalf("Uint(%q): %v; encoding/json %d", in, err, wantN)
		}
		_, _ = Strings(in)
	})
}
