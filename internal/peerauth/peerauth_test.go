package peerauth

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func TestVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	vf := Verifier{Secret: secret, Cluster: 77, Self: 2, Now: func() time.Time { return now }}
	good := Sign(secret, 77, 1, 2, now).String()
	for _, tc := range []struct {
		name string
		v    string
		join bool
		want error // nil: accepted as node 1
	}{
		{"good", good, false, nil},
		{"skew inside the window", Sign(secret, 77, 1, 2, now.Add(-Window)).String(), false, nil},
		{"future inside the window", Sign(secret, 77, 1, 2, now.Add(Window)).String(), false, nil},
		{"too old", Sign(secret, 77, 1, 2, now.Add(-Window-time.Second)).String(), false, ErrExpired},
		{"too new", Sign(secret, 77, 1, 2, now.Add(Window+time.Second)).String(), false, ErrExpired},
		{"wrong secret", Sign([]byte("another secret of 16+ bytes"), 77, 1, 2, now).String(), false, ErrBadMAC},
		{"other cluster", Sign(secret, 78, 1, 2, now).String(), false, ErrBadMAC},
		{"for another node", Sign(secret, 77, 1, 3, now).String(), false, ErrWrongNode},
		{"join outside a join", Sign(secret, 0, 1, 0, now).String(), false, ErrWrongNode},
		{"join", Sign(secret, 0, 1, 0, now).String(), true, nil},
		{"join signed with the cluster id", Sign(secret, 77, 1, 0, now).String(), true, ErrBadMAC},
		{"from nobody", Sign(secret, 77, 0, 2, now).String(), false, ErrMalformed},
		{"missing", "", false, ErrMissing},
		{"sender changed", strings.Replace(good, "v1 1 ", "v1 3 ", 1), false, ErrBadMAC},
		{"time changed", strings.Replace(good, " 1800000000 ", " 1800000001 ", 1), false, ErrBadMAC},
		{"garbage", "Bearer x", false, ErrMalformed},
	} {
		from, err := vf.Verify(tc.v, tc.join)
		switch {
		case tc.want == nil && (err != nil || from != 1):
			t.Errorf("%s: got %d, %v; want node 1", tc.name, from, err)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: got %d, %v; want %v", tc.name, from, err, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	mac := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		v  string
		ok bool
	}{
		{"v1 1 2 3 " + mac, true},
		{"v1 18446744073709551615 0 0 " + mac, true},
		{"v2 1 2 3 " + mac, false},
		{"v1 1 2 3  " + mac, false},
		{"v1 01 2 3 " + mac, false},
		{"v1 +1 2 3 " + mac, false},
		{"v1 -1 2 3 " + mac, false},
		{"v1 1 2 -3 " + mac, false},
		{"v1 1 2 3 " + strings.ToUpper(mac), false},
		{"v1 1 2 3 " + mac[:62], false},
		{"v1 1 2 3 " + mac + "ab", false},
		{"v1 1 2 3 " + mac[:62] + "zz", false},
		{"v1 1 2 18446744073709551615 " + mac, false},
		{"v1 1 2 3 " + mac + " x", false},
		{"", false},
	} {
		tok, err := Parse(tc.v)
		if (err == nil) != tc.ok {
			t.Errorf("Parse(%q) = %v, want ok %v", tc.v, err, tc.ok)
		}
		if err == nil && tok.String() != tc.v {
			t.Errorf("Parse(%q).String() = %q", tc.v, tok.String())
		}
	}
}

// FuzzParse: no input panics Parse or Verify, what parses prints back the
// same, and nothing but a correctly signed authenticator verifies.
func FuzzParse(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	f.Add(Sign(secret, 9, 1, 2, now).String())
	f.Add(Sign(secret, 0, 1, 0, now).String())
	f.Add("v1 1 2 3 " + strings.Repeat("0", 64))
	f.Add("v1    ")
	f.Fuzz(func(t *testing.T, v string) {
		tok, err := Parse(v)
		if err == nil && tok.String() != v {
			t.Fatalf("Parse(%q) prints back %q", v, tok.String())
		}
		vf := Verifier{Secret: secret, Cluster: 9, Self: 2, Now: func() time.Time { return now }}
		for _, join := range []bool{false, true} {
			from, err := vf.Verify(v, join)
			if err != nil {
				continue
			}
			cluster := uint64(9)
			if tok.To == 0 {
				cluster = 0
			}
			if want := Sign(secret, cluster, from, tok.To, time.Unix(tok.Unix, 0)).String(); want != v {
				t.Fatalf("Verify accepted %q, which is not the authenticator %q", v, want)
			}
		}
	})
}
