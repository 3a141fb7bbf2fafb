// Package s3test runs a real S3-compatible server for tests: SeaweedFS's
// `weed server -s3`, built from its Go module the first time (into the
// user's cache directory; later runs reuse it). REWIND_TEST_WEED names a
// weed binary to use instead.
package s3test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine/internal/tier"
)

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
		// A temporary name of this process's own: test binaries of several
		// packages build it at once on a fresh machine (a shared ".tmp"
		// name let one rename the other's build away).
		if err := os.MkdirAll(filepath.Dir(weedPath), 0o755); err != nil {
			weedErr = err
			return
		}
		tmp := fmt.Sprintf("%s.%d.tmp", weedPath, os.Getpid())
		defer os.Remove(tmp)
		build := exec.Command("go", "build", "-o", tmp, "./weed")
		build.Dir = mod.Dir
		build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := build.CombinedOutput(); err != nil {
			weedErr = fmt.Errorf("building seaweedfs: %w\n%s", err, out)
			return
		}
		weedErr = os.Rename(tmp, weedPath) // the same bytes if another process got there first
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
	AccessKey = "rewindtest"
	SecretKey = "rewindtestsecret"
)

// Start runs a SeaweedFS server with an S3 gateway that checks signatures
// against one identity, creates bucket, sets AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY for the test, and returns an s3:// URL of the
// bucket (prefix "history") and a function that stops the server.
func Start(t testing.TB, bucket string) (tierURL string, stop func()) {
	t.Helper()
	bin := weedBinary(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`{"identities":[{"name":"rewind","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`,
		AccessKey, SecretKey)
	cfgPath := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// Each port p picked has p+10000 free too: weed serves gRPC there.
	s3Port, masterPort, volumePort, filerPort := freePortPair(t), freePortPair(t), freePortPair(t), freePortPair(t)
	// -logdir keeps weed's log files (by default in the system's temporary
	// directory, never removed) in the test's.
	args := []string{"-logdir=" + dir, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + dir,
		fmt.Sprintf("-master.port=%d", masterPort), fmt.Sprintf("-volume.port=%d", volumePort),
		"-master.volumeSizeLimitMB=64", "-volume.max=8",
		"-filer", fmt.Sprintf("-filer.port=%d", filerPort),
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
			// weed makes a unix socket per service and port in /tmp (a
			// path of its own, not TMPDIR) and removes none when killed.
			for _, p := range []int{s3Port, masterPort, volumePort, filerPort} {
				for _, port := range []int{p, p + 10000} {
					socks, _ := filepath.Glob(fmt.Sprintf("/tmp/seaweedfs-*-%d.sock", port))
					for _, sock := range socks {
						os.Remove(sock)
					}
				}
			}
		})
	}
	t.Cleanup(stop)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", s3Port)
	Isolate(t, dir)
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	tierURL = fmt.Sprintf("s3://%s/history?endpoint=%s&region=us-east-1", bucket, url.QueryEscape(endpoint))
	// The gateway answers once the master, volume and filer are up:
	// create the bucket until it is there.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := createBucket(tierURL)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the S3 server did not come up: %v\n%s", err, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return tierURL, stop
}

// Isolate keeps the AWS SDK's configuration to what the test sets: no
// credentials, profile, region or endpoint from the environment or from
// ~/.aws (the shared files are named in dir, where there are none), and
// no instance metadata lookups.
func Isolate(t testing.TB, dir string) {
	t.Helper()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_ROLE_SESSION_NAME", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_STS", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_EC2_METADATA_SERVICE_ENDPOINT"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "no-aws-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "no-aws-credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func createBucket(tierURL string) error {
	st, err := tier.Open(tierURL)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return st.(*tier.S3Store).CreateBucket(ctx)
}
