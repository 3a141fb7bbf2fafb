package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/rewind-io/rewind/chaos/history"
	"github.com/rewind-io/rewind/sdk/client"
	"github.com/rewind-io/rewind/sdk/guest/build"
	"github.com/rewind-io/rewind/sdk/guest/scaffold"
)

// keyPrefixPlugin is the name the runner registers the key-prefix filter
// under.
const keyPrefixPlugin = "chaos-key-prefix"

// setupKeyPrefix builds the key-prefix filter of `rewind plugin new` from
// source (it needs the Go toolchain) and registers it.
func setupKeyPrefix(ctx context.Context, c *client.Client, dir string) error {
	proj := filepath.Join(dir, "key-prefix-filter")
	if _, err := scaffold.Write(proj, "chaoskeys", scaffold.Go); err != nil {
		return err
	}
	wasm, err := build.Go(ctx, proj)
	if err != nil {
		return fmt.Errorf("build the key-prefix filter (filtered replays need the Go toolchain): %w", err)
	}
	_, _, err = c.UploadPlugin(ctx, keyPrefixPlugin, wasm, "the scenario runner's key-prefix filter (rewind plugin new)")
	return err
}

// keyPrefixFilter is a filtered replay's name in the history, its config
// and the predicate the module applies.
func keyPrefixFilter(prefix string) (name string, config []byte, keep func(history.Record) bool) {
	return "key-prefix:" + prefix, fmt.Appendf(nil, `{"prefix":%q}`, prefix), func(r history.Record) bool { return strings.HasPrefix(r.Key, prefix) }
}
