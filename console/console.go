// Package console embeds Rewind's web console (built from the TypeScript
// sources in this directory into dist/, which is checked in) and serves it
// at /console/. The console is static: a page, one script and one style
// sheet, which call the node's public API from the browser through the
// TypeScript client (sdk/ts) on the same origin.
//
// Rebuild dist/ after editing src/ with
//
//	cd console && npm ci && npm run build
//
// TestBundleIsFresh fails when dist/ is stale against its sources.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed dist
var dist embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console/"

// CSP is the Content-Security-Policy of every console response: scripts,
// styles and API calls from the node's own origin only, nothing inline,
// no frames, no forms posted elsewhere.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Assets returns the built console (index.html, console.js, console.css).
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded: it is always there
	}
	return sub
}

// Handler serves the console's files under Prefix, with the CSP and no
// caching (the file names carry no version), and redirects /console to
// /console/. Only GET and HEAD are served.
func Handler() http.Handler {
	files := http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(Assets()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// Mount returns a handler that serves the console at /console and
// /console/..., redirects a GET or HEAD of / there (302: the root may
// serve something else one day), and serves everything else with api.
func Mount(api http.Handler) http.Handler {
	console := Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			http.Redirect(w, r, Prefix, http.StatusFound)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") || strings.HasPrefix(r.URL.Path, Prefix) {
			console.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
