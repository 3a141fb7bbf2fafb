package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rewind-io/rewind/scenarios/history"
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
	return buildPlugin(ctx, c, filepath.Join(dir, "key-prefix-filter"), keyPrefixPlugin, "the scenario runner's key-prefix filter (rewind plugin new)", nil)
}

// buildPlugin writes the Go project of `rewind plugin new` into proj, lets
// edit change its main.go (nil: none; its test is removed then, as it
// tests the original), builds the module from source (it needs the Go
// toolchain) and registers it as name.
func buildPlugin(ctx context.Context, c *client.Client, proj, name, what string, edit func(main []byte) ([]byte, error)) error {
	if _, err := scaffold.Write(proj, "chaosplugin", scaffold.Go); err != nil {
		return err
	}
	if edit != nil {
		main := filepath.Join(proj, "main.go")
		src, err := os.ReadFile(main)
		if err != nil {
			return err
		}
		if src, err = edit(src); err != nil {
			return err
		}
		if err := os.WriteFile(main, src, 0o644); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(proj, "main_test.go")); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	wasm, err := build.Go(ctx, proj)
	if err != nil {
		return fmt.Errorf("build %s (it needs the Go toolchain): %w", what, err)
	}
	if _, _, err := c.UploadPlugin(ctx, name, wasm, what); err != nil {
		return fmt.Errorf("register %s: %w", what, err)
	}
	return nil
}

// keyPrefixFilter is a filtered replay's name in the history, its config
// and the predicate the module applies.
func keyPrefixFilter(prefix string) (name string, config []byte, keep func(history.Record) bool) {
	return "key-prefix:" + prefix, fmt.Appendf(nil, `{"prefix":%q}`, prefix), func(r history.Record) bool { return strings.HasPrefix(r.Key, prefix) }
}

// tagTransformPlugin is the name the runner registers its transform under.
const tagTransformPlugin = "chaos-tag-transform"

// tagSuffix is what the transform appends to the values it keeps.
const tagSuffix = "+rewound"

// setupTagTransform builds, from the project `rewind plugin new` writes,
// a transform that keeps the records whose key starts with the configured
// prefix and appends tagSuffix to their values, and registers it.
func setupTagTransform(ctx context.Context, c *client.Client, dir string) error {
	const keep = "func keep(r filter.Record) bool { return bytes.HasPrefix(r.Key, prefix) }"
	return buildPlugin(ctx, c, filepath.Join(dir, "tag-transform"), tagTransformPlugin, "the scenario runner's tag transform", func(src []byte) ([]byte, error) {
		if !bytes.Contains(src, []byte(keep)) || !bytes.Contains(src, []byte("filter.Filter(keep)")) {
			return nil, errors.New("the scaffolded filter changed: the tag transform cannot be made from it")
		}
		src = bytes.Replace(src, []byte("filter.Filter(keep)"), []byte("filter.Transform(tag)"), 1)
		return bytes.Replace(src, []byte(keep), []byte(`var scratch []byte

func tag(r filter.Record) (filter.Record, bool) {
	if !bytes.HasPrefix(r.Key, prefix) {
		return r, false
	}
	scratch = append(append(scratch[:0], r.Value...), "`+tagSuffix+`"...)
	r.Value = scratch
	return r, true
}`), 1), nil
	})
}

// tagTransform is a transformed replay's name in the history, its config
// and what the module does to a record.
func tagTransform(prefix string) (name string, config []byte, tf func(history.Record) (history.Record, bool)) {
	return "tag:" + prefix, fmt.Appendf(nil, `{"prefix":%q}`, prefix), func(r history.Record) (history.Record, bool) {
		if !strings.HasPrefix(r.Key, prefix) {
			return r, false
		}
		r.Value += tagSuffix
		return r, true
	}
}
