package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/sandbox"
)

// member is one top-level member of a JSON object, as raw bytes.
type member struct {
	key        string // raw, between the quotes
	start, end int    // the raw value's span in the object
}

// members is an independent reading of a JSON object with encoding/json:
// the top-level members with raw keys and value spans, or false when v is
// not a valid JSON object.
func members(v []byte) ([]member, bool) {
	t := bytes.TrimLeft(v, " \t\r\n")
	if !json.Valid(v) || len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	var out []member
	for dec.More() {
		off0 := dec.InputOffset()
		if _, err := dec.Token(); err != nil {
			return nil, false
		}
		off1 := dec.InputOffset()
		raw := bytes.TrimLeft(v[off0:off1], " \t\r\n,")
		key := string(raw[1 : len(raw)-1])
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, false
		}
		end := int(dec.InputOffset())
		out = append(out, member{key: key, start: end - len(val), end: end})
	}
	return out, true
}

// example is an example module with a config and the outputs it must give,
// computed in Go.
type example struct {
	name   string
	config string
	want   func(r rec) (keep, replaced bool, value string)
}

func keepIf(ok bool) (bool, bool, string) { return ok, false, "" }

func examples() []example {
	jsonEquals := func(field, equals string) func(rec) (bool, bool, string) {
		return func(r rec) (bool, bool, string) {
			ms, ok := members([]byte(r.value))
			if !ok {
				return keepIf(false)
			}
			for _, m := range ms {
				if m.key == field {
					raw := r.value[m.start:m.end]
					return keepIf(len(raw) >= 2 && raw[0] == '"' && raw[1:len(raw)-1] == equals)
				}
			}
			return keepIf(false)
		}
	}
	redact := func(field, with string) func(rec) (bool, bool, string) {
		repl := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(with) + `"`
		return func(r rec) (bool, bool, string) {
			ms, ok := members([]byte(r.value))
			if !ok {
				return false, false, ""
			}
			var b strings.Builder
			from, hits := 0, 0
			for _, m := range ms {
				if m.key == field {
					hits++
					b.WriteString(r.value[from:m.start])
					b.WriteString(repl)
					from = m.end
				}
			}
			if hits == 0 {
				return true, false, ""
			}
			b.WriteString(r.value[from:])
			return true, true, b.String()
		}
	}
	project := func(fields ...string) func(rec) (bool, bool, string) {
		return func(r rec) (bool, bool, string) {
			ms, ok := members([]byte(r.value))
			if !ok {
				return false, false, ""
			}
			var parts []string
			for _, m := range ms {
				for _, f := range fields {
					if m.key == f {
						parts = append(parts, `"`+m.key+`":`+r.value[m.start:m.end])
						break
					}
				}
			}
			return true, true, "{" + strings.Join(parts, ",") + "}"
		}
	}
	return []example{
		{"keyprefix", `{"prefix":"user-1"}`, func(r rec) (bool, bool, string) { return keepIf(strings.HasPrefix(r.key, "user-1")) }},
		{"keyprefix", `{"prefix":""}`, func(rec) (bool, bool, string) { return keepIf(true) }},
		{"keyprefix", `{"other":1,"prefix":"x","prefix":"ord"}`, func(r rec) (bool, bool, string) { return keepIf(strings.HasPrefix(r.key, "ord")) }},
		{"jsonfield", `{"field":"type","equals":"order.created"}`, jsonEquals("type", "order.created")},
		{"jsonfield", `{"field":"n","equals":"1"}`, jsonEquals("n", "1")},
		{"jsonfield", `{"field":"type","equals":"a\\\"b"}`, jsonEquals("type", `a\"b`)}, // raw content a\"b
		{"header", `{"header":"source","equals":"web"}`, func(r rec) (bool, bool, string) {
			for _, h := range r.headers {
				if string(h.Key) == "source" && string(h.Value) == "web" {
					return keepIf(true)
				}
			}
			return keepIf(false)
		}},
		{"sample", `{"n":7}`, func(r rec) (bool, bool, string) { return keepIf(r.offset%7 == 0) }},
		{"sample", `{"n":1}`, func(rec) (bool, bool, string) { return keepIf(true) }},
		{"redact", `{"field":"email"}`, redact("email", "***")},
		{"redact", `{"field":"type","with":"x\"\\y"}`, redact("type", `x"\y`)},
		{"project", `{"fields":["id","type"]}`, project("id", "type")},
		{"project", `{"fields":[]}`, project()},
	}
}

// corpus is a deterministic mix of records: keys with shared prefixes, JSON
// values valid and not (escapes, duplicates, nesting, trailing garbage,
// other JSON types, whitespace), and headers.
func corpus(n int, seed uint64) []rec {
	rnd := rand.New(rand.NewPCG(seed, 1))
	keys := []string{"user-1", "user-10", "user-2", "order-7", "ord", "", "user-1\x00", "\xffbin"}
	values := []string{
		`{"type":"order.created","id":1}`,
		`{"type":"order.updated","id":2,"email":"a@b.c"}`,
		` { "id" : 3 , "type" : "order.created" , "email" : "x" } `,
		`{"type":"order.created","type":"dup"}`,
		`{"email":"a","email":"b","type":"order.created"}`,
		`{"type":"order\u002ecreated"}`,
		`{"ty\u0070e":"order.created"}`,
		`{"type":"a\"b"}`,
		`{"type":"order.created"} x`,
		`{"type":"order.created",}`,
		`{"type":"order.created"`,
		`{"nested":{"type":"order.created"},"type":1}`,
		`{"type":["order.created"]}`,
		`{"n":1,"id":[1,2,{"a":null}],"type":true}`,
		`["type","order.created"]`,
		`"order.created"`,
		`null`,
		``,
		`not json`,
		`{}`,
		`{"id":1e5,"type":"order.created","email":null}`,
		`{"id":01}`,
		"{\"type\":\"order.created\",\"bad\":\"\x01\"}",
		`{"email":{"deep":[1,2,3]},"id":"z"}`,
	}
	out := make([]rec, n)
	for i := range out {
		r := rec{offset: uint64(1000 + i), time: int64(1_700_000_000_000_000_000 + i), key: keys[rnd.IntN(len(keys))], value: values[rnd.IntN(len(values))]}
		for range rnd.IntN(4) {
			k := []string{"source", "trace", "source", "Source"}[rnd.IntN(4)]
			v := []string{"web", "app", "", "web "}[rnd.IntN(4)]
			r.headers = append(r.headers, sandbox.Header{Key: []byte(k), Value: []byte(v)})
		}
		out[i] = r
	}
	return out
}

type outRec struct {
	Index      int
	Replaced   bool
	Key, Value string
	Headers    []sandbox.Header
}

func normalize(outs []sandbox.Output) []outRec {
	res := make([]outRec, len(outs))
	for i, o := range outs {
		res[i] = outRec{Index: o.Index, Replaced: o.Replaced, Key: string(o.Key), Value: string(o.Value), Headers: o.Headers}
		if len(res[i].Headers) == 0 {
			res[i].Headers = nil
		}
	}
	return res
}

// TestExampleConfigs checks that both languages refuse the same bad
// configs at rewind_init, and that the error carries the module's own
// message (each example's messages start with its name).
func TestExampleConfigs(t *testing.T) {
	r := newRuntime(t, sandbox.Limits{})
	for _, c := range []struct{ name, config, says string }{
		{"keyprefix", ``, ""},
		{"keyprefix", `{}`, ""},
		{"keyprefix", `{"prefix":null}`, `config needs "prefix"`},
		{"keyprefix", `{"prefix":1}`, `"prefix" must be a JSON string`},
		{"keyprefix", `[1]`, ""},
		{"keyprefix", `{"prefix":"a"`, ""},
		{"jsonfield", `{"field":"type"}`, ""},
		{"header", `{"equals":"web"}`, ""},
		{"sample", `{"n":0}`, ""},
		{"sample", `{"n":-1}`, ""},
		{"sample", `{"n":1.5}`, ""},
		{"sample", `{"n":"3"}`, ""},
		{"redact", `{"with":"x"}`, ""},
		{"redact", `{"field":"a","with":3}`, ""},
		{"project", `{"fields":"id"}`, ""},
		{"project", `{"fields":[1]}`, ""},
	} {
		for _, lang := range []string{"go", "as"} {
			m := compile(t, r, module(t, lang, c.name))
			_, err := m.NewFilter([]byte(c.config)).Run(context.Background(), batchOf([]rec{{key: "k"}}), nil)
			if sandbox.KindOf(err) != sandbox.KindConfig || !strings.Contains(err.Error(), "refused its config: ") || !strings.Contains(err.Error(), c.name+": ") ||
				!strings.Contains(err.Error(), c.says) {
				t.Errorf("%s %s with config %q: %v, want a config refusal with the module's message %q", lang, c.name, c.config, err, c.says)
			}
		}
	}
}
