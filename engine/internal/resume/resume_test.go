package resume

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	for _, tok := range []Token{
		{TopicID: 1, Positions: []Position{}},
		{TopicID: 9, Positions: []Position{{0, 10}, {1, 0}, {7, 1 << 40}}},
	} {
		got, err := Parse(tok.String())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tok, got); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	}
}

func TestGarbageRejected(t *testing.T) {
	good := Token{TopicID: 2, Positions: []Position{{0, 5}, {3, 8}}}.String()
	for _, s := range []string{"", "abc", good[:len(good)-2], good + "AA", "!" + good[1:],
		Token{TopicID: 2, Positions: []Position{{3, 1}, {0, 1}}}.String()} {
		if _, err := Parse(s); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Parse(%q) = %v, want ErrInvalid", s, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Token{TopicID: 2, Positions: []Position{{0, 5}, {3, 8}}}.String())
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := Parse(s)
		if err != nil {
			return
		}
		if tok.String() != s {
			t.Fatalf("Parse(%q) re-encodes to %q", s, tok.String())
		}
	})
}
