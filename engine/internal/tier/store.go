package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/rewind-io/rewind/internal/atomicfile"
)

// ErrNotFound is returned for an object that does not exist.
var ErrNotFound = errors.New("tier: object not found")

// Object describes a stored object.
type Object struct {
	Name     string
	Size     int64
	Modified time.Time // when it was written
}

// Store is an object store holding segments. Objects are written whole and
// never changed; names use '/' as the separator.
type Store interface {
	// Put stores data under name, durably, replacing nothing: writing a
	// name again writes the same bytes (names are content-derived).
	Put(ctx context.Context, name string, data []byte) error
	// ReadRange returns n bytes of the object from byte off.
	ReadRange(ctx context.Context, name string, off, n int64) ([]byte, error)
	// Size returns the object's size.
	Size(ctx context.Context, name string) (int64, error)
	// List returns the objects whose names start with prefix, sorted.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Delete removes the object; deleting a missing object is no error.
	Delete(ctx context.Context, name string) error
	// String names the store for messages (no credentials).
	String() string
}

// Open returns the store a --tier URL names: file:///path is a directory
// on this machine (or a shared mount); s3://bucket/prefix?endpoint=&region=
// &path_style=&profile=&credentials= a bucket of S3 or an S3-compatible
// store (NewS3Store).
func Open(rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("tier: %q is not a URL: %w", rawURL, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("tier: %q: a file URL names a local path (file:///path)", rawURL)
		}
		if u.Path == "" || !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("tier: %q: the path must be absolute (file:///path)", rawURL)
		}
		return NewFileStore(u.Path)
	case "s3":
		return NewS3Store(u)
	default:
		return nil, fmt.Errorf("tier: %q: unknown scheme %q (want file or s3)", rawURL, u.Scheme)
	}
}

// FileStore keeps objects as files under a directory.
type FileStore struct{ dir string }

// NewFileStore returns a store over dir, creating it if needed. The
// objects hold every record, so the store keeps them to the node's user:
// the directories it creates are 0700 and its objects 0600 (an existing
// dir keeps its mode: it may be a mount the operator shares on purpose).
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tier: %w", err)
	}
	return &FileStore{dir: dir}, nil
}

func (s *FileStore) String() string { return "file://" + s.dir }

// path maps an object name to its file, refusing names that would leave
// the directory.
func (s *FileStore) path(name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || !fs.ValidPath(name) ||
		strings.HasPrefix(path.Base(name), ".") {
		return "", fmt.Errorf("tier: invalid object name %q", name)
	}
	return filepath.Join(s.dir, filepath.FromSlash(name)), nil
}

// Put writes a temporary file, syncs it, renames it into place and syncs
// the directory: a crash leaves either no object or the whole object (and
// perhaps a temporary file, which List does not show).
// putStep is how much of an object a file store writes between syncs: a
// segment of 16 MiB synced at once held the node's raft log syncs on the
// same disk behind it.
const putStep = 1 << 20

func (s *FileStore) Put(ctx context.Context, name string, data []byte) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("tier: put %s: %w", name, err)
	}
	if err := atomicfile.WriteInSteps(p, data, 0o600, putStep); err != nil {
		return fmt.Errorf("tier: put %s: %w", name, err)
	}
	return nil
}

// PutIfAbsent writes data under name unless a file is there already:
// a synced temporary file, hard-linked into place (a link never replaces
// a file), then the directory synced. created is false when the file
// existed.
func (s *FileStore) PutIfAbsent(ctx context.Context, name string, data []byte) (created bool, err error) {
	p, err := s.path(name)
	if err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("tier: put %s: %w", name, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return false, fmt.Errorf("tier: put %s: %w", name, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = linkFile(tmp, p)
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.ENOSYS) {
			// A mount without hard links (gcsfuse, blobfuse, s3fs, some
			// SMB shares): an exclusive create. Not atomic: a crash while
			// it writes leaves a short file, which the marker's reader
			// takes for another cluster's (the node refuses to start and
			// names the file to check).
			err = createExclusive(p, data)
		}
	}
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err == nil {
		err = atomicfile.SyncDir(dir)
	}
	if err != nil {
		return false, fmt.Errorf("tier: put %s: %w", name, err)
	}
	return true, nil
}

// linkFile is os.Link; a test swaps it to play a mount without hard links.
var linkFile = os.Link

// createExclusive writes data to a new file p, synced; fs.ErrExist if p
// exists.
func createExclusive(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(p)
	}
	return err
}

// ReadRange reads n bytes at off; fewer bytes than asked is an error.
func (s *FileStore) ReadRange(ctx context.Context, name string, off, n int64) ([]byte, error) {
	p, err := s.path(name)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("tier: read %s: bad range %d+%d", name, off, n)
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("tier: read %s: %w", name, err)
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: %d bytes at %d run past its end", ErrCorrupt, name, n, off)
		}
		return nil, fmt.Errorf("tier: read %s: %w", name, err)
	}
	return buf, nil
}

// Size returns the file's size.
func (s *FileStore) Size(ctx context.Context, name string) (int64, error) {
	p, err := s.path(name)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return 0, fmt.Errorf("tier: stat %s: %w", name, err)
	}
	return fi.Size(), nil
}

// List walks the directory for names under prefix (temporary files are
// left out).
func (s *FileStore) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		rel, err := filepath.Rel(s.dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if !strings.HasPrefix(name, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, Object{Name: name, Size: fi.Size(), Modified: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tier: list %s: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete removes the file.
func (s *FileStore) Delete(ctx context.Context, name string) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("tier: delete %s: %w", name, err)
	}
	return nil
}
