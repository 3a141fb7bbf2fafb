package httpedge

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"connectrpc.com/connect"
)

// The Host check against DNS rebinding. A web page the developer opens
// can point a name it owns (evil.example) at 127.0.0.1 and then call the
// node "from its own origin": the browser sends Host: evil.example. A
// request passes when its Host (without the port) is
//
//  1. an IP literal: a rebinding page cannot make the browser send one;
//  2. localhost or a name under .localhost (RFC 6761: always loopback);
//  3. one of the allowed names: the hosts of --listen and --advertise, the
//     members' addresses, and --allowed-hosts; an allowed name starting
//     with "*." admits the names under it, and "*" admits every Host (the
//     check is off);
//  4. empty (HTTP/1.0 without Host): no browser sends that.
//
// Any other request is refused with PermissionDenied (HTTP 403) naming
// the flag.

// CheckHosts refuses the requests to h whose Host is none of allowed (see
// above).
func CheckHosts(h http.Handler, allowed []string) http.Handler {
	exact, suffixes := map[string]bool{}, []string(nil)
	for _, a := range allowed {
		a = normalHost(a)
		switch {
		case a == "*":
			return h
		case strings.HasPrefix(a, "*."):
			suffixes = append(suffixes, a[1:])
		case a != "":
			exact[a] = true
		}
	}
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := normalHost(r.Host)
		if hostAllowed(host, exact, suffixes) {
			h.ServeHTTP(w, r)
			return
		}
		counters.hostsRefused.Add(1)
		err := connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"the Host header %q is not a name of this node (DNS rebinding protection): add it to --allowed-hosts", host))
		if r.ProtoMajor == 1 && r.ContentLength != 0 {
			w.Header().Set("Connection", "close")
		}
		if ew.IsSupported(r) {
			_ = ew.Write(w, r, err)
			return
		}
		http.Error(w, err.Message(), http.StatusForbidden)
	})
}

func hostAllowed(host string, exact map[string]bool, suffixes []string) bool {
	if host == "" || host == "localhost" || strings.HasSuffix(host, ".localhost") || exact[host] {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	for _, s := range suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// normalHost is the host part of a Host header or a host:port, lower
// case, without brackets or a final dot.
func normalHost(s string) string {
	s = strings.TrimSpace(s)
	if h, _, err := net.SplitHostPort(s); err == nil {
		s = h
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	return strings.TrimSuffix(strings.ToLower(s), ".")
}

// HostOf is the host part of a host:port (or of a bare host), for the
// allowed names.
func HostOf(addr string) string { return normalHost(addr) }
