package tier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The S3 store is tested against a real S3-compatible server: SeaweedFS's
// `weed server -s3`, built from its Go module the first time (into the
// user's cache directory; later runs reuse it). REWIND_TEST_WEED names a
// weed binary to use instead.

const seaweedVersion = "v0.0.0-20261109003541-7506e5f91cd6"

var (
	weedOnce sync.Once
	weedPath string
	weedErr  error
)

// weedBinary returns the path of a weed binary, building it once.
func weedBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("REWIND_TEST_WEED"); p != "" {
		return p
	}
	weedOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			weedErr = err
			return
		}
		weedPath = filepath.Join(cache, "rewind-test", "weed-"+seaweedVersion)
		if _, err := os.Stat(weedPath); err == nil {
			return
		}
		// Outside any module, so that nothing here touches Rewind's go.mod.
		dl := exec.Command("go", "mod", "download", "-json", "github.com/seaweedfs/seaweedfs@"+seaweedVersion)
		dl.Dir, dl.Env = os.TempDir(), append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		out, err := dl.Output()
		if err != nil {
			weedErr = fmt.Errorf("go mod download seaweedfs: %w", err)
			return
		}
		var mod struct{ Dir string }
		if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
			weedErr = fmt.Errorf("go mod download seaweedfs: no directory in %s", out)
			return
		}
		tmp := weedPath + ".tmp"
		build := exec.Command("go", "build", "-o", tmp, "./weed")
		build.Dir = mod.Dir
		build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := build.CombinedOutput(); err != nil {
			weedErr = fmt.Errorf("building seaweedfs: %w\n%s", err, out)
			return
		}
		weedErr = os.Rename(tmp, weedPath)
	})
	if weedErr != nil {
		t.Fatalf("the S3 test server: %v", weedErr)
	}
	return weedPath
}

// freePortPair returns a port p such that p and p+10000 (SeaweedFS's gRPC
// port for it) are both free now.
func freePortPair(t testing.TB) int {
	t.Helper()
	for range 200 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+10000 > 65535 {
			continue
		}
		if l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000)); err == nil {
			l2.Close()
			return p
		}
	}
	t.Fatal("no free port pair")
	return 0
}

const (
	testAccessKey = "rewindtest"
	testSecretKey = "rewindtestsecret"
)

// startS3 runs a SeaweedFS server with an S3 gateway that checks
// signatures against one identity, creates bucket, and returns an
// s3:// URL for it and a function that stops the server.
func startS3(t *testing.T, bucket string) (tierURL string, stop func()) {
	t.Helper()
	bin := weedBinary(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`{"identities":[{"name":"rewind","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`,
		testAccessKey, testSecretKey)
	cfgPath := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s3Port := freePortPair(t)
	args := []string{"server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + dir,
		fmt.Sprintf("-master.port=%d", freePortPair(t)), fmt.Sprintf("-volume.port=%d", freePortPair(t)),
		"-master.volumeSizeLimitMB=64", "-volume.max=8",
		"-filer", fmt.Sprintf("-filer.port=%d", freePortPair(t)),
		"-s3", fmt.Sprintf("-s3.port=%d", s3Port), "-s3.config=" + cfgPath}
	cmd := exec.Command(bin, args...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
	t.Cleanup(stop)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", s3Port)
	t.Setenv("AWS_ACCESS_KEY_ID", testAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecretKey)
	tierURL = fmt.Sprintf("s3://%s/history?endpoint=%s&region=us-east-1", bucket, url.QueryEscape(endpoint))
	st, err := Open(tierURL)
	if err != nil {
		t.Fatal(err)
	}
	s3 := st.(*S3Store)
	// The gateway answers once the master, volume and filer are up:
	// create the bucket until it is there.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := s3.do(context.Background(), http.MethodPut, "", nil, nil, nil, http.StatusOK, http.StatusConflict)
		if err == nil {
			resp.Body.Close()
			break
		}
		// The bucket path: do() puts the key after the bucket, so an
		// empty key is the bucket itself.
		if time.Now().After(deadline) {
			t.Fatalf("the S3 server did not come up: %v\n%s", err, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return tierURL, stop
}

// TestS3StoreAgainstARealServer runs the store's five calls, the segment
// reader and the refusals against SeaweedFS's S3 gateway.
func TestS3StoreAgainstARealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs SeaweedFS")
	}
	ctx := context.Background()
	u, stop := startS3(t, "rewind")
	st, err := Open(u)
	if err != nil {
		t.Fatal(err)
	}
	in := batches(t, 1000, 20, 7)
	obj, f, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	name := Name(3, 1, f, obj)
	if err := st.Put(ctx, name, obj); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Size(ctx, name); err != nil || n != int64(len(obj)) {
		t.Fatalf("size %d %v, want %d", n, err, len(obj))
	}
	seg, err := OpenSegment(ctx, st, name)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range in {
		b, err := seg.ReadBatch(ctx, st, i)
		if err != nil || !bytes.Equal(b.Bytes(), want.Data) {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	// Listing pages and strips the URL's prefix.
	for i := range 3 {
		if err := st.Put(ctx, fmt.Sprintf("topics/3/2/%d.seg", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := st.List(ctx, Prefix(3, 1))
	if err != nil || len(objs) != 1 || objs[0].Name != name || objs[0].Size != int64(len(obj)) ||
		time.Since(objs[0].Modified) > time.Hour {
		t.Fatalf("list: %+v %v", objs, err)
	}
	if objs, err := st.List(ctx, "topics/3/"); err != nil || len(objs) != 4 {
		t.Fatalf("list of the topic: %+v %v", objs, err)
	}
	if _, err := st.ReadRange(ctx, "topics/3/1/missing.seg", 0, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing object: %v, want ErrNotFound", err)
	}
	if err := st.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSegment(ctx, st, name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	// Wrong credentials are refused by the server, with its reason.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	bad, err := Open(u)
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Put(ctx, "topics/x", []byte("x")); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a wrong secret: %v, want a 403 refusal", err)
	}
	// A store that is down is an error, not a hang.
	stop()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := st.Size(cctx, "topics/3/2/0.seg"); err == nil {
		t.Fatal("the store is down, and a call succeeded")
	}
}
