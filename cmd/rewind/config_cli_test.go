//go:build unix

package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestServeConfigFileAndEnvironment runs the real binary with a file and
// a variable that set the same flag, one the file alone sets and one both
// the file and the command line set: the variable wins over the file (as
// a browser on each origin sees it), the file over the default (the Host
// check), the command line over the file (the log level).
func TestServeConfigFileAndEnvironment(t *testing.T) {
	p := writeConfig(t, "allow_origin = [\"https://file.example\"]\nlog_level = \"info\"\nallowed_hosts = [\"svc.file.example\"]\n")
	s := &server{url: "http://" + enginetest.FreeAddr(t)}
	pc := enginetest.ProcessConfig{
		Bin: enginetest.Binary(t), Addr: strings.TrimPrefix(s.url, "http://"), Dir: t.TempDir(),
		Args: []string{"--config", p, "--console=false"},
		// The log level is a flag of StartProcess's ("warn"): the
		// file's "info" loses to it, so the memory line must not show.
		Env: cliEnv("REWIND_ALLOW_ORIGIN=https://env.example,https://env2.example"),
	}
	pc.Ready = func(context.Context, *enginetest.Process) error {
		if r := runCLI(t, nil, nil, "--server", s.url, "topic", "list"); r.code != 0 {
			return fmt.Errorf("`topic list`: exit %d, stderr %q", r.code, r.stderr)
		}
		return nil
	}
	s.Process = enginetest.StartProcess(t, pc)
	for origin, allowed := range map[string]bool{"https://env.example": true, "https://env2.example": true, "https://file.example": false} {
		req, err := http.NewRequest(http.MethodOptions, s.url+"/rewind.v1.TopicService/ListTopics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin") == origin; got != allowed {
			t.Errorf("origin %s allowed: %v, want %v", origin, got, allowed)
		}
	}
	if resp, err := http.Get(s.url + "/console/"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("--console=false on the command line: GET /console/ %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// The file alone names an allowed host: the Host check lets it in.
	for host, want := range map[string]int{"svc.file.example": http.StatusOK, "other.example": http.StatusForbidden} {
		req, err := http.NewRequest(http.MethodGet, s.url+"/readyz", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /readyz with Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
	if strings.Contains(s.Log(), "memory:") {
		t.Errorf("the file's log_level = \"info\" won over --log-level warn:\n%s", s.Log())
	}
}
