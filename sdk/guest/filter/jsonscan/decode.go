package jsonscan

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The decoders below allocate: they are for configuration (rewind_init),
// not for records. Each takes one raw value as Iter.Value returns it, with
// no surrounding whitespace, and reports ErrSyntax when it is not one valid
// JSON value and ErrType when it is one of another type.

// String decodes a JSON string as encoding/json does: escapes processed, a
// \u escape of an unpaired surrogate and each byte of invalid UTF-8 turned
// into U+FFFD.
func String(value []byte) (string, error) {
	if err := checkValue(value, '"'); err != nil {
		return "", err
	}
	s := value[1 : len(value)-1]
	if simple(s) {
		return string(s), nil
	}
	buf := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			var r rune
			r, i = unescape(s, i)
			buf = utf8.AppendRune(buf, r)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			buf = utf8.AppendRune(buf, r) // RuneError for a bad byte
			i += size
		}
	}
	return string(buf), nil
}

// simple reports whether the content of a valid string needs no decoding:
// no escapes and valid UTF-8.
func simple(s []byte) bool {
	for _, c := range s {
		if c == '\\' {
			return false
		}
	}
	return utf8.Valid(s)
}

// unescape decodes the escape at s[i] (a '\' in the content of a valid
// string) and returns the rune and the offset after the escape, consuming
// a following low surrogate escape when it completes a pair.
func unescape(s []byte, i int) (rune, int) {
	switch s[i+1] {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
		r := hex4(s[i+2 : i+6])
		i += 6
		if !utf16.IsSurrogate(r) {
			return r, i
		}
		if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
			if dec := utf16.DecodeRune(r, hex4(s[i+2:i+6])); dec != utf8.RuneError {
				return dec, i + 6
			}
		}
		return utf8.RuneError, i
	default: // '"', '\\', '/'
		return rune(s[i+1]), i + 2
	}
}

// hex4 decodes four hex digits, already validated.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// Uint decodes a JSON number that is an integer written without sign,
// fraction or exponent and fits in a uint64; any other number, or a value
// of another type, is ErrType.
func Uint(value []byte) (uint64, error) {
	if err := checkValue(value, '0'); err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(string(value), 10, 64)
	if err != nil {
		return 0, ErrType // a sign, a fraction, an exponent, or too big
	}
	return n, nil
}

// Strings decodes a JSON array of strings (each as String does).
func Strings(value []byte) ([]string, error) {
	if err := checkValue(value, '['); err != nil {
		return nil, err
	}
	out := []string{}
	p := skipSpace(value, 1)
	if value[p] == ']' {
		return out, nil
	}
	for {
		if value[p] != '"' {
			return nil, ErrType
		}
		end, _ := skipString(value, p) // valid: checked above
		s, err := String(value[p:end])
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		p = skipSpace(value, end)
		if value[p] == ']' {
			return out, nil
		}
		p = skipSpace(value, p+1) // the ','
	}
}

// checkValue reports ErrSyntax unless value is exactly one valid JSON
// value, and ErrType unless it is of the kind first stands for ('"', '[',
// or '0' for a number).
func checkValue(value []byte, first byte) error {
	if end, ok := skipValue(value, 0, 1); !ok || end != len(value) {
		return ErrSyntax
	}
	c := value[0]
	if first == '0' {
		if c == '-' || isDigit(c) {
			return nil
		}
		return ErrType
	}
	if c != first {
		return ErrType
	}
	return nil
}
