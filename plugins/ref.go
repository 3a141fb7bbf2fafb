package plugins

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrBadRef reports a plugin reference or name that does not parse.
var ErrBadRef = errors.New("plugins: bad reference")

// Ref names a module: a plugin name with an optional version (0: the
// newest), or a module's sha256.
type Ref struct {
	Name    string
	Version uint32
	// SHA256 is hex; set instead of Name.
	SHA256 string
}

// ParseRef parses "NAME", "NAME@VERSION" or "sha256:HEX".
func ParseRef(s string) (Ref, error) {
	if hexsum, ok := strings.CutPrefix(s, "sha256:"); ok {
		if len(hexsum) != 64 {
			return Ref{}, fmt.Errorf("%w: %q: a sha256 is 64 hex digits", ErrBadRef, s)
		}
		if _, err := hex.DecodeString(hexsum); err != nil {
			return Ref{}, fmt.Errorf("%w: %q: not hex", ErrBadRef, s)
		}
		return Ref{SHA256: strings.ToLower(hexsum)}, nil
	}
	name, version, hasVersion := strings.Cut(s, "@")
	if err := ValidName(name); err != nil {
		return Ref{}, err
	}
	r := Ref{Name: name}
	if hasVersion {
		v, err := strconv.ParseUint(version, 10, 32)
		if err != nil || v == 0 {
			return Ref{}, fmt.Errorf("%w: %q: a version is a number from 1", ErrBadRef, s)
		}
		r.Version = uint32(v)
	}
	return r, nil
}

func (r Ref) String() string {
	switch {
	case r.SHA256 != "":
		return "sha256:" + r.SHA256
	case r.Version != 0:
		return fmt.Sprintf("%s@%d", r.Name, r.Version)
	}
	return r.Name
}

// MaxNameLen bounds plugin names.
const MaxNameLen = 128

// ValidName checks a plugin name: [a-zA-Z0-9._-]{1,128}.
func ValidName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: a plugin name has 1 to %d characters", ErrBadRef, MaxNameLen)
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: plugin name %q: only letters, digits, '.', '_' and '-'", ErrBadRef, name)
		}
	}
	return nil
}
