package tier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rewind-io/rewind/internal/atomicfile"
)

// MarkerName is the object, at the top of a store (beside topics/), that
// names the cluster the store belongs to. Two clusters on one prefix would
// see each other's objects as those of deleted topics and delete them; the
// marker makes the second one refuse to start instead.
const MarkerName = "CLUSTER"

// OtherClusterError is returned when a store's marker names another
// cluster than the one claiming it.
type OtherClusterError struct {
	Store string // the store (String), with its prefix
	Found string // the owner its marker names
	Owner string // the owner that asked
}

func (e *OtherClusterError) Error() string {
	return fmt.Sprintf("tier: %s belongs to another cluster: its %s object names %q, and this node is of %q; "+
		"give each cluster its own bucket prefix or directory (delete the object only if that cluster and its history are gone)",
		e.Store, MarkerName, e.Found, e.Owner)
}

// ErrNotClaimed is returned by a ClaimedStore's writes and deletions while
// its marker could not be checked (the store was unreachable).
var ErrNotClaimed = errors.New("tier: the store's cluster marker is not checked yet")

// absentPutter is a store that can write an object only if it is absent,
// atomically: FileStore (a hard link) and S3Store (If-None-Match: *).
type absentPutter interface {
	PutIfAbsent(ctx context.Context, name string, data []byte) (created bool, err error)
}

// ClaimedStore is a Store that belongs to one cluster: its writes and
// deletions go through only once the store's marker (MarkerName) is
// found to name owner, or was written by it; each deletion checks the
// marker again. Reads go through regardless (they change nothing). It is
// safe for concurrent use.
type ClaimedStore struct {
	Store
	owner string
	mu    struct {
		sync.Mutex
		claimed bool
		other   *OtherClusterError // sticky: the marker named another owner
	}
}

// NewClaimedStore wraps st for owner (a cluster's identity, one line of
// text; every member of a cluster passes the same). It sends nothing:
// call Claim at start.
func NewClaimedStore(st Store, owner string) *ClaimedStore {
	return &ClaimedStore{Store: st, owner: owner}
}

// Claim checks the marker, writing it if it is absent. It returns an
// *OtherClusterError if the marker names another owner (from then on every
// write and deletion fails with it), and any other error if the store could
// not be asked (writes and deletions then try again first).
//
// The marker is written with a conditional put where the store has one
// (If-None-Match: * on S3, a hard link on a file store), so of two
// clusters starting at once on an empty prefix one wins and the other
// reads its marker. On an S3-compatible store that ignores If-None-Match,
// the two could both find no marker and both write; the last write stays,
// and the other cluster is refused at its next start or first claim.
func (s *ClaimedStore) Claim(ctx context.Context) error {
	s.mu.Lock()
	claimed, other := s.mu.claimed, s.mu.other
	s.mu.Unlock()
	if other != nil {
		return other
	}
	if claimed {
		return nil
	}
	// No lock across the store's I/O: concurrent claims are idempotent.
	err := claim(ctx, s.Store, s.owner)
	s.mu.Lock()
	defer s.mu.Unlock()
	var oe *OtherClusterError
	switch {
	case errors.As(err, &oe):
		s.mu.other = oe
	case err == nil:
		s.mu.claimed = true
	}
	return err
}

func (s *ClaimedStore) ensure(ctx context.Context) error {
	if err := s.Claim(ctx); err != nil {
		var oe *OtherClusterError
		if errors.As(err, &oe) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrNotClaimed, err)
	}
	return nil
}

// Put writes once the store is claimed.
func (s *ClaimedStore) Put(ctx context.Context, name string, data []byte) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	return s.Store.Put(ctx, name, data)
}

// Delete deletes once the store is claimed, and checks the marker again
// first, every time: a deletion cannot be undone, and on a store that
// ignores If-None-Match another cluster starting at the same moment may
// have overwritten the marker since Claim (two more requests per deletion,
// which are rare: whole segments, by the hour).
func (s *ClaimedStore) Delete(ctx context.Context, name string) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	if err := claim(ctx, s.Store, s.owner); err != nil {
		var oe *OtherClusterError
		if errors.As(err, &oe) {
			s.mu.Lock()
			s.mu.other = oe
			s.mu.Unlock()
		}
		return err
	}
	return s.Store.Delete(ctx, name)
}

// claim reads the marker, and writes it if absent.
func claim(ctx context.Context, st Store, owner string) error {
	for range 2 {
		found, err := readMarker(ctx, st)
		switch {
		case err == nil && found == owner:
			return nil
		case err == nil:
			return &OtherClusterError{Store: st.String(), Found: found, Owner: owner}
		case !errors.Is(err, ErrNotFound):
			return fmt.Errorf("tier: read the cluster marker of %s: %w", st, err)
		}
		data := []byte(owner + "\n")
		ap, ok := st.(absentPutter)
		if !ok {
			// Read then write: two owners starting at once may both write.
			return st.Put(ctx, MarkerName, data)
		}
		created, err := ap.PutIfAbsent(ctx, MarkerName, data)
		if err != nil {
			return fmt.Errorf("tier: write the cluster marker of %s: %w", st, err)
		}
		if created {
			return nil
		}
		// Another node wrote it between our read and write: read it.
	}
	return fmt.Errorf("tier: the cluster marker of %s is there and not there (deleted while it was checked?)", st)
}

// maxMarker bounds the marker read: an owner is one short line.
const maxMarker = 4 << 10

func readMarker(ctx context.Context, st Store) (string, error) {
	n, err := st.Size(ctx, MarkerName)
	if err != nil {
		return "", err
	}
	if n == 0 || n > maxMarker {
		return fmt.Sprintf("(a %d-byte object, not a marker)", n), nil
	}
	data, err := st.ReadRange(ctx, MarkerName, 0, n)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

// localOwnerFile holds a lone node's random identity, in its data
// directory.
const localOwnerFile = "tier-owner"

// LocalOwner returns the identity of a node that runs alone (it has no
// cluster id to share: every lone node's is 0), created at its first start
// as random bytes and kept in dir: "node <32 hex digits>".
func LocalOwner(dir string) (string, error) {
	p := filepath.Join(dir, localOwnerFile)
	data, err := os.ReadFile(p)
	if err == nil {
		if s := strings.TrimSpace(string(data)); s != "" {
			return s, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("tier: the node's identity: %w", err)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	owner := "node " + hex.EncodeToString(b[:])
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("tier: the node's identity: %w", err)
	}
	if err := atomicfile.Write(p, []byte(owner+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("tier: the node's identity: %w", err)
	}
	return owner, nil
}
