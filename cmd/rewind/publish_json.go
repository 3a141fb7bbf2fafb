package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rewind-io/rewind/sdk/client"
)

// jsonInput is one line of publish --input json.
type jsonInput struct {
	Key            *string        `json:"key"`
	Value          string         `json:"value"`
	Headers        orderedHeaders `json:"headers"`
	IdempotencyKey string         `json:"idempotency_key"`
	Partition      *uint32        `json:"partition"`
}

// jsonFields are the fields of a line, in the order errors name them, with
// what each must be.
var jsonFields = []struct{ name, want string }{
	{"key", "a string"},
	{"value", "a string"},
	{"headers", "an object of strings"},
	{"idempotency_key", "a string"},
	{"partition", "a partition number (0, 1, ...)"},
}

// parseJSONLine decodes one line of --input json. Its errors are for the
// person who wrote the line: where the JSON breaks, which field has the
// wrong type and what it should be, which field is unknown. A field the
// command does not know is refused rather than ignored: a misspelt
// "vaule" would otherwise store an empty record.
func parseJSONLine(b []byte) (jsonInput, error) {
	var in jsonInput
	if len(bytes.TrimSpace(b)) == 0 {
		return in, errors.New(`empty line: want a JSON object such as {"key":"k","value":"v"}`)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return in, syntaxError(b, se)
		}
		return in, fmt.Errorf("want a JSON object, got %s", jsonKind(b))
	}
	if fields == nil {
		return in, errors.New("want a JSON object, got null")
	}
	for _, f := range jsonFields {
		raw, ok := fields[f.name]
		if !ok {
			continue
		}
		delete(fields, f.name)
		var err error
		switch f.name {
		case "key":
			err = json.Unmarshal(raw, &in.Key)
		case "value":
			err = json.Unmarshal(raw, &in.Value)
		case "headers":
			err = json.Unmarshal(raw, &in.Headers)
		case "idempotency_key":
			err = json.Unmarshal(raw, &in.IdempotencyKey)
		case "partition":
			err = json.Unmarshal(raw, &in.Partition)
		}
		if err != nil {
			var he *headerError
			if errors.As(err, &he) {
				return in, fmt.Errorf("field %q: %w", f.name, he)
			}
			return in, fmt.Errorf("field %q: want %s, got %s", f.name, f.want, jsonKind(raw))
		}
	}
	if len(fields) > 0 {
		unknown := slices.Sorted(func(yield func(string) bool) {
			for k := range fields {
				if !yield(k) {
					return
				}
			}
		})
		names := make([]string, len(jsonFields))
		for i, f := range jsonFields {
			names[i] = f.name
		}
		return in, fmt.Errorf("unknown field %q (the fields are %s)", unknown[0], strings.Join(names, ", "))
	}
	return in, nil
}

// syntaxError says where the JSON of line b breaks, by column (in
// characters, from 1) and the character found there.
func syntaxError(b []byte, se *json.SyntaxError) error {
	at := int(se.Offset) - 1 // the byte the decoder stopped at
	if at < 0 || at >= len(b) || strings.HasPrefix(se.Error(), "unexpected end") {
		return errors.New("not valid JSON: the line ends before the JSON object does")
	}
	r, _ := utf8.DecodeRune(b[at:])
	col := utf8.RuneCount(b[:at]) + 1
	hint := ""
	if r == '\'' || unicode.IsLetter(r) {
		hint = " (strings and field names go in double quotes)"
	}
	return fmt.Errorf("not valid JSON: unexpected %q at column %d%s", r, col, hint)
}

// jsonKind names the kind of the JSON value raw: "a string", "the number
// -1", "an array"...
func jsonKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	const most = 24
	if len(raw) > most {
		return "a number"
	}
	return fmt.Sprintf("the number %s", raw)
}

// orderedHeaders is a JSON object of string headers, kept in the order
// the line wrote them. (A Go map lost it, and a record's payload hash,
// which the idempotency check compares, covers its headers in order: an
// identical republish was refused as a different record about 1 time in
// 5.)
type orderedHeaders []client.Header

// headerError is what is wrong with a "headers" field.
type headerError struct{ msg string }

func (e *headerError) Error() string { return e.msg }

// UnmarshalJSON reads an object of strings; null is no headers. Its
// errors are *headerError.
func (h *orderedHeaders) UnmarshalJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	t, err := d.Token()
	if err != nil {
		return &headerError{"want an object of strings: " + err.Error()}
	}
	if t == nil {
		*h = nil
		return nil
	}
	if t != json.Delim('{') {
		return &headerError{"want an object of strings, got " + jsonKind(b)}
	}
	var out orderedHeaders
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return &headerError{"want an object of strings: " + err.Error()}
		}
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return &headerError{"want an object of strings: " + err.Error()}
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return &headerError{fmt.Sprintf("header %q: want a string, got %s", k, jsonKind(raw))}
		}
		out = append(out, client.Header{Key: k.(string), Value: []byte(v)})
	}
	if _, err := d.Token(); err != nil {
		return &headerError{"want an object of strings: " + err.Error()}
	}
	*h = out
	return nil
}
