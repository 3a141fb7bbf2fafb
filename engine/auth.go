package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/api"
	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/broker"
)

// BootstrapTokenFile is the file, in the data directory, that the first
// start with Auth writes the superuser's token to (mode 0600).
const BootstrapTokenFile = "bootstrap-token"

// BootstrapPrincipal is the superuser the bootstrap token speaks for.
const BootstrapPrincipal = "root"

// authRun is the bootstrap of the authorization state: one goroutine,
// owned by the node, that proposes it until some member's proposal won.
type authRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	ready  chan struct{}
}

// startAuth starts the bootstrap of the authorization state (the api
// server was built with apiAuth).
func (n *Node) startAuth(cfg Config, log hclog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	n.auth = &authRun{cancel: cancel, done: make(chan struct{}), ready: make(chan struct{})}
	go func() {
		defer close(n.auth.done)
		bootstrapAuth(ctx, n.b, cfg.Dir, log)
		close(n.auth.ready)
	}()
}

// apiAuth is the api server's authentication configuration (nil with auth
// off).
func apiAuth(cfg Config, log hclog.Logger) *api.AuthConfig {
	if !cfg.Auth.Enabled {
		return nil
	}
	audit := cfg.Auth.AuditLog
	if audit == nil {
		audit = logWriter{log.Named("audit")}
	}
	return &api.AuthConfig{Audit: auth.NewAudit(audit, nil), Now: cfg.hooks.Clock, RecheckInterval: cfg.Auth.RecheckInterval,
		Failures: cfg.Auth.Failures}
}

// AuthReady is closed once the authorization state exists (the bootstrap
// token is written on the node whose proposal won); never with auth off.
func (n *Node) AuthReady() <-chan struct{} {
	if n.auth == nil {
		return nil
	}
	return n.auth.ready
}

func (n *Node) stopAuth() {
	if n.auth != nil {
		n.auth.cancel()
		<-n.auth.done
	}
}

// bootstrapAuth initializes the authorization state on the first start with
// auth: a superuser token, written to the data directory before it is
// proposed (so a crash in between loses nothing: the next start proposes
// again and overwrites it), and removed again if another member's
// proposal won. It retries until the metadata group answers.
func bootstrapAuth(ctx context.Context, b *broker.Broker, dir string, log hclog.Logger) {
	path := filepath.Join(dir, BootstrapTokenFile)
	for ctx.Err() == nil {
		if b.Auth().Initialized() {
			return
		}
		bearer, tok := auth.NewToken(BootstrapPrincipal, time.Now().UnixNano(), 0)
		err := writeSecret(path, bearer+"\n")
		if err == nil {
			var res auth.Result
			res, err = b.ProposeAuth(ctx, auth.Command{Init: &auth.Init{Superuser: BootstrapPrincipal, Token: tok, ResumeKey: auth.NewResumeKey()}})
			switch {
			case err == nil && !res.Unchanged:
				log.Info("authentication initialized: the superuser token is in the bootstrap token file (read it, keep it safe, then delete the file)",
					"principal", BootstrapPrincipal, "path", path)
				return
			case err == nil:
				_ = os.Remove(path) // another member's proposal won
				return
			}
		}
		log.Debug("auth bootstrap: retrying", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// writeSecret writes data to path with mode 0600, atomically.
func writeSecret(path, data string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("engine: bootstrap token: %w", err)
	}
	_, err = f.WriteString(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("engine: bootstrap token: %w", err)
	}
	return nil
}

// logWriter sends audit lines to the server log.
type logWriter struct{ log hclog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info("audit", "event", string(bytes.TrimSpace(p)))
	return len(p), nil
}

// bearerOption makes a client send token (the --join call of a node
// joining a cluster with auth on).
func bearerOption(token string) connect.ClientOption {
	return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if token != "" {
				req.Header().Set("Authorization", "Bearer "+token)
			}
			return next(ctx, req)
		}
	}))
}
