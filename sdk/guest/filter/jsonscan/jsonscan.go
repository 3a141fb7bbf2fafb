// Package jsonscan reads the top-level fields of a JSON object in place,
// without allocating, for the hot path of filters and transforms: find a
// field's raw value, compare a string value, walk the fields in order. It
// never unescapes on the hot path; String, Uint and Strings decode values
// (allocating) for configuration.
//
// # What "valid" means
//
// Every function that reads an object validates all of it, so a record whose
// value is broken after the field of interest is still refused. Valid means
// RFC 8259 as encoding/json.Valid reads it:
//
//  1. whitespace is space, tab, LF and CR, allowed around every token and
//     around the object itself;
//  2. strings hold any byte >= 0x20 except an unescaped '"' or '\'; the
//     escapes are \" \\ \/ \b \f \n \r \t and \u followed by four hex
//     digits; bytes are not checked for UTF-8 validity;
//  3. numbers follow the JSON grammar (no leading zeros, no '+', no bare
//     '.'); literals are true, false and null;
//  4. containers nest at most 10,000 deep, the top-level object counting as
//     one.
//
// # Keys
//
// Keys are compared as their raw bytes between the quotes, with no escape
// processing: "ty\u0070e" is not the key type. When a key occurs more than
// once, the first occurrence is "the field" (Find); Fields yields every
// occurrence.
package jsonscan

import "errors"

var (
	// ErrSyntax reports bytes that are not valid JSON.
	ErrSyntax = errors.New("jsonscan: invalid JSON")
	// ErrNotObject reports input whose first non-whitespace byte is not
	// '{' (another JSON type, or not JSON at all).
	ErrNotObject = errors.New("jsonscan: not a JSON object")
	// ErrType reports a valid value of another JSON type than the decoder
	// (String, Uint, Strings) reads.
	ErrType = errors.New("jsonscan: wrong JSON type")
)

// maxDepth is encoding/json's nesting limit, kept so that the two agree on
// what is valid.
const maxDepth = 10000

// Iter walks the top-level fields of a JSON object in input order. The zero
// Iter reads empty input: it yields nothing and reports ErrSyntax. An Iter
// lives on the caller's stack; it allocates nothing.
//
//	it := jsonscan.Fields(value)
//	for it.Next() {
//		use(it.Key(), it.Value())
//	}
//	if it.Err() != nil {
//		// value was not a valid JSON object
//	}
type Iter struct {
	b     []byte
	pos   int // next byte to read; in stateFields b[pos] is ',' or '}'
	state uint8
	err   error
	// Invariant after Next returned true: b[keyStart-1] and b[keyEnd] are
	// the key's quotes, and b[valStart:valEnd] is one valid JSON value.
	keyStart, keyEnd, valStart, valEnd int
	// found, findStart and findEnd are Find's result.
	found              bool
	findStart, findEnd int
}

const (
	stateStart  = iota // before the '{'
	stateFields        // after a field; b[pos] is ',' or '}'
	stateDone          // finished, successfully or not
)

// Fields returns an iterator over the top-level fields of obj.
func Fields(obj []byte) Iter { return Iter{b: obj} }

// Next advances to the next field and reports whether there is one. A field
// is yielded once it, everything before it and the ',' or '}' after it are
// valid; whether the whole input is a valid object is known only when Next
// has returned false (see Err).
func (it *Iter) Next() bool { return it.run(true, false, "") }

func (it *Iter) fail(err error) bool {
	it.err, it.state = err, stateDone
	return false
}

// finish checks that only whitespace follows the closing brace at p-1.
func (it *Iter) finish(p int) bool {
	if skipSpace(it.b, p) != len(it.b) {
		return it.fail(ErrSyntax)
	}
	it.pos, it.state = len(it.b), stateDone
	return false
}

// Key is the current field's key: its raw bytes between the quotes, escapes
// not processed. It aliases the input.
func (it *Iter) Key() []byte { return it.b[it.keyStart:it.keyEnd:it.keyEnd] }

// Value is the current field's raw value (a string with its quotes, a
// number, an object, ...), without surrounding whitespace. It aliases the
// input.
func (it *Iter) Value() []byte { return it.b[it.valStart:it.valEnd:it.valEnd] }

// KeyOffset is the offset in the input of the current field's opening
// quote: the field, as `"key": value`, spans
// input[KeyOffset():ValueOffset()+len(Value())].
func (it *Iter) KeyOffset() int { return it.keyStart - 1 }

// ValueOffset is the offset in the input of Value's first byte.
func (it *Iter) ValueOffset() int { return it.valStart }

// Err is nil once Next has returned false at the end of a valid object,
// ErrNotObject or ErrSyntax if it returned false early. Before Next has
// returned false it is nil.
func (it *Iter) Err() error { return it.err }

// Find returns the span obj[start:end] of the raw value of the first
// top-level field whose raw key is key, after validating all of obj. A
// valid object without that field gives start = end = -1 and a nil error;
// invalid input gives -1, -1 and ErrSyntax or ErrNotObject.
func Find(obj []byte, key string) (start, end int, err error) {
	it := Fields(obj)
	it.run(false, true, key)
	if it.err != nil || !it.found {
		return -1, -1, it.err
	}
	return it.findStart, it.findEnd, nil
}

// ValidObject reports whether b is one valid JSON object, optionally
// surrounded by whitespace.
func ValidObject(b []byte) bool {
	it := Fields(b)
	it.run(false, false, "")
	return it.err == nil
}

// StringEquals reports whether value, a raw value as Iter.Value or Find
// return it, is a JSON string whose raw content between the quotes equals s
// byte for byte (escapes are not processed: the string "a\u0062" does not
// equal "ab").
func StringEquals(value []byte, s string) bool {
	n := len(value)
	return n >= 2 && value[0] == '"' && value[n-1] == '"' && string(value[1:n-1]) == s
}

// fastDepth is how deep run tracks nesting itself, one bit per level;
// deeper containers are checked by the recursive skipValue.
const fastDepth = 64

// run is the validating scanner behind Next, Find and ValidObject. With
// stop it returns true after the next top-level member (its spans in it)
// and false at the end; without, it reads to the end (false). With find it
// records the first member whose raw key is key.
//
// It is one function of gotos, not a family of small ones, on purpose:
// compiled to WebAssembly by Go, every call in a hot loop costs tens of
// nanoseconds in spilled state, several times the cost of the bytes it
// reads. The containers open above the top-level object are a bit stack
// (objs: bit 0 is the innermost, 1 for an object), so nothing recurses
// until fastDepth.
func (it *Iter) run(stop, find bool, key string) bool {
	var (
		b     = it.b
		p     = it.pos
		depth = 1 // open containers, the top-level object included
		objs  = uint64(1)
		// The current top-level member: key span and value start.
		ks, ke, vs int
		// sStart is the opening quote of the string being read, inKey
		// whether it is a key.
		sStart int
		inKey  bool
		c      byte
		ok     bool
	)
	switch it.state {
	case stateStart:
		p = skipSpace(b, p)
		if p >= len(b) {
			return it.fail(ErrSyntax)
		}
		if b[p] != '{' {
			return it.fail(ErrNotObject)
		}
		p = skipSpace(b, p+1)
		if p < len(b) && b[p] == '}' {
			return it.finish(p + 1)
		}
		goto key
	case stateFields:
		goto delim
	default:
		return false
	}

key: // in an object: a key at p
	if p >= len(b) || b[p] != '"' {
		goto fail
	}
	inKey = true
	goto str

keyDone: // p is after the key's closing quote
	if depth == 1 {
		ks, ke = sStart+1, p-1
	}
	p = skipSpace(b, p)
	if p >= len(b) || b[p] != ':' {
		goto fail
	}
	p = skipSpace(b, p+1)
	goto value

value: // a value at p
	if p >= len(b) {
		goto fail
	}
	if depth == 1 {
		vs = p
	}
	c = b[p]
	switch {
	case c == '"':
		inKey = false
		goto str
	case c == '{' || c == '[':
		if depth == fastDepth {
			if p, ok = skipValue(b, p, depth+1); !ok {
				goto fail
			}
			goto valueDone
		}
		depth++
		objs <<= 1
		p = skipSpace(b, p+1)
		if c == '[' {
			if p < len(b) && b[p] == ']' {
				p++
				goto pop
			}
			goto value
		}
		objs |= 1
		if p < len(b) && b[p] == '}' {
			p++
			goto pop
		}
		goto key
	case c == 't':
		if len(b)-p < 4 || b[p+1] != 'r' || b[p+2] != 'u' || b[p+3] != 'e' {
			goto fail
		}
		p += 4
	case c == 'f':
		if len(b)-p < 5 || b[p+1] != 'a' || b[p+2] != 'l' || b[p+3] != 's' || b[p+4] != 'e' {
			goto fail
		}
		p += 5
	case c == 'n':
		if len(b)-p < 4 || b[p+1] != 'u' || b[p+2] != 'l' || b[p+3] != 'l' {
			goto fail
		}
		p += 4
	default: // a number
		if c == '-' {
			p++
		}
		if p >= len(b) {
			goto fail
		}
		if c = b[p]; c == '0' {
			p++
		} else if '1' <= c && c <= '9' {
			for p++; p < len(b) && isDigit(b[p]); p++ {
			}
		} else {
			goto fail
		}
		if p < len(b) && b[p] == '.' {
			if p++; p >= len(b) || !isDigit(b[p]) {
				goto fail
			}
			for p++; p < len(b) && isDigit(b[p]); p++ {
			}
		}
		if p < len(b) && (b[p] == 'e' || b[p] == 'E') {
			if p++; p < len(b) && (b[p] == '+' || b[p] == '-') {
				p++
			}
			if p >= len(b) || !isDigit(b[p]) {
				goto fail
			}
			for p++; p < len(b) && isDigit(b[p]); p++ {
			}
		}
	}
	goto valueDone

str: // b[p] is an opening quote
	sStart = p
	p++
strRun:
	// Eight bytes at a time while none of them is '"', '\' or a control
	// byte; the loads combine into one 64-bit load.
	for len(b)-p >= 8 {
		w := uint64(b[p]) | uint64(b[p+1])<<8 | uint64(b[p+2])<<16 | uint64(b[p+3])<<24 |
			uint64(b[p+4])<<32 | uint64(b[p+5])<<40 | uint64(b[p+6])<<48 | uint64(b[p+7])<<56
		if special(w) {
			break
		}
		p += 8
	}
	for p < len(b) && plain[b[p]] {
		p++
	}
	if p >= len(b) {
		goto fail
	}
	switch b[p] {
	case '"':
		p++
		if inKey {
			goto keyDone
		}
		goto valueDone
	case '\\':
		if p+1 >= len(b) {
			goto fail
		}
		switch b[p+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			p += 2
		case 'u':
			if p+6 > len(b) || !isHex(b[p+2]) || !isHex(b[p+3]) || !isHex(b[p+4]) || !isHex(b[p+5]) {
				goto fail
			}
			p += 6
		default:
			goto fail
		}
		goto strRun
	}
	goto fail // a control byte

valueDone: // p is after a complete value
	if depth > 1 {
		goto delim
	}
	// A top-level member ends at p; it counts once a delimiter follows.
	sStart = p // reuse: the value's end
	p = skipSpace(b, p)
	if p >= len(b) || b[p] != ',' && b[p] != '}' {
		goto fail
	}
	if find && !it.found && string(b[ks:ke]) == key {
		it.found, it.findStart, it.findEnd = true, vs, sStart
	}
	if stop {
		it.keyStart, it.keyEnd, it.valStart, it.valEnd = ks, ke, vs, sStart
		it.pos, it.state = p, stateFields
		return true
	}

delim: // after a value: ',' or the container's closer
	p = skipSpace(b, p)
	if p >= len(b) {
		goto fail
	}
	switch c = b[p]; {
	case c == ',':
		p = skipSpace(b, p+1)
		if objs&1 != 0 {
			goto key
		}
		goto value
	case c == '}' && objs&1 != 0, c == ']' && objs&1 == 0:
		p++
		goto pop
	}
	goto fail

pop: // p is after the closer of the innermost container
	depth--
	objs >>= 1
	if depth == 0 {
		return it.finish(p)
	}
	goto valueDone

fail:
	return it.fail(ErrSyntax)
}

// special reports whether any byte of w is '"', '\\' or below 0x20
// (exact as a boolean; see "Bit Twiddling Hacks", haszero and hasless).
func special(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := w ^ (ones * '"')
	bs := w ^ (ones * '\\')
	return ((w-ones*0x20)&^w|(q-ones)&^q|(bs-ones)&^bs)&highs != 0
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, p int) int {
	for p < len(b) && isSpace(b[p]) {
		p++
	}
	return p
}

// plain marks the bytes that may appear unescaped inside a string and end
// nothing: everything >= 0x20 except '"' and '\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipString reads the string whose opening quote is at b[p] and returns
// the offset after its closing quote.
func skipString(b []byte, p int) (int, bool) {
	p++
	for {
		for p < len(b) && plain[b[p]] {
			p++
		}
		if p >= len(b) {
			return p, false
		}
		switch b[p] {
		case '"':
			return p + 1, true
		case '\\':
			if p+1 >= len(b) {
				return p, false
			}
			switch b[p+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p += 2
			case 'u':
				if p+6 > len(b) || !isHex(b[p+2]) || !isHex(b[p+3]) || !isHex(b[p+4]) || !isHex(b[p+5]) {
					return p, false
				}
				p += 6
			default:
				return p, false
			}
		default: // a control byte
			return p, false
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipValue reads one value starting at b[p] (no leading whitespace); a
// container it opens is at nesting depth depth.
func skipValue(b []byte, p, depth int) (int, bool) {
	if p >= len(b) {
		return p, false
	}
	switch c := b[p]; {
	case c == '"':
		return skipString(b, p)
	case c == '{':
		return skipObject(b, p, depth)
	case c == '[':
		return skipArray(b, p, depth)
	case c == 't':
		return skipLiteral(b, p, "true")
	case c == 'f':
		return skipLiteral(b, p, "false")
	case c == 'n':
		return skipLiteral(b, p, "null")
	case c == '-' || isDigit(c):
		return skipNumber(b, p)
	}
	return p, false
}

func skipLiteral(b []byte, p int, lit string) (int, bool) {
	if len(b)-p < len(lit) || string(b[p:p+len(lit)]) != lit {
		return p, false
	}
	return p + len(lit), true
}

func skipNumber(b []byte, p int) (int, bool) {
	if b[p] == '-' {
		p++
	}
	switch {
	case p >= len(b):
		return p, false
	case b[p] == '0':
		p++
	case isDigit(b[p]):
		p = skipDigits(b, p)
	default:
		return p, false
	}
	if p < len(b) && b[p] == '.' {
		p++
		if p >= len(b) || !isDigit(b[p]) {
			return p, false
		}
		p = skipDigits(b, p)
	}
	if p < len(b) && (b[p] == 'e' || b[p] == 'E') {
		p++
		if p < len(b) && (b[p] == '+' || b[p] == '-') {
			p++
		}
		if p >= len(b) || !isDigit(b[p]) {
			return p, false
		}
		p = skipDigits(b, p)
	}
	return p, true
}

func skipDigits(b []byte, p int) int {
	for p < len(b) && isDigit(b[p]) {
		p++
	}
	return p
}

func skipObject(b []byte, p, depth int) (int, bool) {
	if depth > maxDepth {
		return p, false
	}
	p = skipSpace(b, p+1)
	if p < len(b) && b[p] == '}' {
		return p + 1, true
	}
	for {
		if p >= len(b) || b[p] != '"' {
			return p, false
		}
		var ok bool
		if p, ok = skipString(b, p); !ok {
			return p, false
		}
		p = skipSpace(b, p)
		if p >= len(b) || b[p] != ':' {
			return p, false
		}
		if p, ok = skipValue(b, skipSpace(b, p+1), depth+1); !ok {
			return p, false
		}
		p = skipSpace(b, p)
		if p >= len(b) {
			return p, false
		}
		switch b[p] {
		case ',':
			p = skipSpace(b, p+1)
		case '}':
			return p + 1, true
		default:
			return p, false
		}
	}
}

func skipArray(b []byte, p, depth int) (int, bool) {
	if depth > maxDepth {
		return p, false
	}
	p = skipSpace(b, p+1)
	if p < len(b) && b[p] == ']' {
		return p + 1, true
	}
	for {
		var ok bool
		if p, ok = skipValue(b, p, depth+1); !ok {
			return p, false
		}
		p = skipSpace(b, p)
		if p >= len(b) {
			return p, false
		}
		switch b[p] {
		case ',':
			p = skipSpace(b, p+1)
		case ']':
			return p + 1, true
		default:
			return p, false
		}
	}
}
