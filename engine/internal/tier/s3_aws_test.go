package tier_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine/internal/tier"
	"github.com/rewind-io/rewind/engine/internal/tier/s3test"
)

// endpointOf returns the endpoint= of an s3test URL.
func endpointOf(t *testing.T, tierURL string) string {
	t.Helper()
	u, err := url.Parse(tierURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("endpoint")
}

// withEndpoint returns tierURL with another endpoint and prefix.
func withEndpoint(t *testing.T, tierURL, endpoint, prefix string) string {
	t.Helper()
	u, err := url.Parse(tierURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("endpoint", endpoint)
	u.RawQuery, u.Path = q.Encode(), "/"+prefix
	return u.String()
}

// roundTrip writes an object through a store opened from tierURL and
// reads it back.
func roundTrip(t *testing.T, tierURL, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := tier.Open(tierURL)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("object " + name)
	if err := st.Put(ctx, name, data); err != nil {
		t.Fatalf("put: %v", err)
	}
	got, err := st.ReadRange(ctx, name, 0, int64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %q %v", got, err)
	}
}

// noEnvKeys takes the SeaweedFS keys s3test.Start put in the environment
// away, so that only the source under test can provide credentials.
func noEnvKeys(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
}

// TestS3StoreOnAWSTerms runs one SeaweedFS server and, against it, each
// way a node on AWS gets its credentials, the retries of a store that
// throttles, and the cluster marker.
func TestS3StoreOnAWSTerms(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs SeaweedFS")
	}
	u, _ := s3test.Start(t, "rewind")
	endpoint := endpointOf(t, u)

	t.Run("SharedProfile", func(t *testing.T) {
		noEnvKeys(t)
		dir := t.TempDir()
		t.Setenv("HOME", dir)
		creds := filepath.Join(dir, "credentials")
		data := fmt.Sprintf("[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n[tier]\naws_access_key_id = %s\naws_secret_access_key = %s\n",
			s3test.AccessKey, s3test.SecretKey)
		if err := os.WriteFile(creds, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
		t.Setenv("AWS_PROFILE", "tier")
		roundTrip(t, u, "profile/env")
		// The same file and profile named in the URL instead.
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
		t.Setenv("AWS_PROFILE", "")
		roundTrip(t, u+"&credentials="+url.QueryEscape(creds)+"&profile=tier", "profile/url")
		// A profile of the config file (AWS_CONFIG_FILE), region included.
		cfg := filepath.Join(dir, "config")
		data = fmt.Sprintf("[profile cfg]\nregion = us-east-1\naws_access_key_id = %s\naws_secret_access_key = %s\n", s3test.AccessKey, s3test.SecretKey)
		if err := os.WriteFile(cfg, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_CONFIG_FILE", cfg)
		t.Setenv("AWS_PROFILE", "cfg")
		roundTrip(t, "s3://rewind/history?endpoint="+url.QueryEscape(endpoint), "profile/config")
	})

	t.Run("EndpointAndRegionFromEnvironment", func(t *testing.T) {
		// No endpoint= nor region=: AWS_ENDPOINT_URL_S3 names the store
		// (path style by default, as for endpoint=), AWS_DEFAULT_REGION
		// the region its signatures are scoped to.
		t.Setenv("AWS_ENDPOINT_URL_S3", endpoint)
		t.Setenv("AWS_DEFAULT_REGION", "eu-west-1")
		st, err := tier.Open("s3://rewind/history")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(st.String(), endpoint) {
			t.Errorf("the store is %s, want it to name %s", st, endpoint)
		}
		roundTrip(t, "s3://rewind/history", "env/a")
	})

	t.Run("WebIdentity", func(t *testing.T) {
		noEnvKeys(t)
		dir := t.TempDir()
		token := filepath.Join(dir, "token")
		if err := os.WriteFile(token, []byte("a-projected-service-account-token"), 0o600); err != nil {
			t.Fatal(err)
		}
		const role = "arn:aws:iam::123456789012:role/rewind-tier"
		var calls atomic.Int32
		var lifetime atomic.Int64 // of the credentials STS hands out
		lifetime.Store(int64(time.Hour))
		var bad atomic.Value // a refusal to report, from the stub's goroutine
		sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := r.ParseForm(); err != nil {
				bad.Store(err.Error())
			}
			if r.Form.Get("Action") != "AssumeRoleWithWebIdentity" || r.Form.Get("RoleArn") != role ||
				r.Form.Get("WebIdentityToken") != "a-projected-service-account-token" {
				bad.Store(fmt.Sprintf("STS asked %v", r.Form))
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			calls.Add(1)
			w.Header().Set("Content-Type", "text/xml")
			fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey>
<Expiration>%s</Expiration></Credentials>
<AssumedRoleUser><Arn>%s/s</Arn><AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser></AssumeRoleWithWebIdentityResult>
<ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`,
				s3test.AccessKey, s3test.SecretKey, time.Now().Add(time.Duration(lifetime.Load())).UTC().Format(time.RFC3339), role)
		}))
		defer sts.Close()
		t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", token)
		t.Setenv("AWS_ROLE_ARN", role)
		t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)
		roundTrip(t, u, "webidentity/a")
		if b := bad.Load(); b != nil {
			t.Fatal(b)
		}
		if calls.Load() != 1 {
			t.Fatalf("STS was asked %d times for one store's calls, want once (credentials are cached until they expire)", calls.Load())
		}
		// Credentials with less than the refresh window left are fetched
		// again before each call (a put and a read here).
		lifetime.Store(int64(2 * time.Minute))
		roundTrip(t, u, "webidentity/b")
		if got := calls.Load(); got < 3 {
			t.Fatalf("STS was asked %d times in all; credentials about to expire were not fetched again", got)
		}
	})

	t.Run("InstanceMetadata", func(t *testing.T) {
		noEnvKeys(t)
		const imdsToken = "imds-session-token"
		var tokens, creds atomic.Int32
		imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
				tokens.Add(1)
				w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
				fmt.Fprint(w, imdsToken)
				return
			case r.Header.Get("X-Aws-Ec2-Metadata-Token") != imdsToken: // IMDSv2 only
				http.Error(w, "", http.StatusUnauthorized)
				return
			case r.URL.Path == "/latest/meta-data/iam/security-credentials/":
				fmt.Fprint(w, "rewind-node")
			case r.URL.Path == "/latest/meta-data/iam/security-credentials/rewind-node":
				creds.Add(1)
				json.NewEncoder(w).Encode(map[string]any{"Code": "Success", "AccessKeyId": s3test.AccessKey,
					"SecretAccessKey": s3test.SecretKey, "Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
			default:
				http.NotFound(w, r)
			}
		}))
		defer imds.Close()
		t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
		t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
		roundTrip(t, u, "imds/a")
		if tokens.Load() == 0 || creds.Load() != 1 {
			t.Fatalf("IMDS: %d session tokens, %d credential reads; want IMDSv2 sessions and one read", tokens.Load(), creds.Load())
		}
	})

	t.Run("RetriesSlowDown", func(t *testing.T) {
		target, err := url.Parse(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		// A proxy in front of the store that answers the first requests
		// 503 SlowDown, as S3 does to a prefix it is scaling.
		const refusals = 3
		var mu sync.Mutex
		var seen, refused int
		proxy := httputil.NewSingleHostReverseProxy(target)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen++
			refuse := refused < refusals
			if refuse {
				refused++
			}
			mu.Unlock()
			if refuse {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		defer srv.Close()
		proxied := withEndpoint(t, u, srv.URL, "history")
		st, err := tier.Open(proxied)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		in := testBatches(t, 0, 30, 5)
		obj, f, err := tier.Build(in)
		if err != nil {
			t.Fatal(err)
		}
		name := tier.Name(9, 0, f, obj)
		if err := st.Put(ctx, name, obj); err != nil {
			t.Fatalf("a put through %d SlowDowns: %v", refusals, err)
		}
		mu.Lock()
		if refused != refusals || seen != refusals+1 {
			t.Fatalf("the proxy saw %d requests and refused %d; want %d refusals, then the put", seen, refused, refusals)
		}
		mu.Unlock()
		// Nothing lost: the object reads back whole, batch by batch, from
		// the store itself.
		direct, err := tier.Open(u)
		if err != nil {
			t.Fatal(err)
		}
		seg, err := tier.OpenSegment(ctx, direct, name)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range in {
			if b, err := seg.ReadBatch(ctx, direct, i); err != nil || !bytes.Equal(b.Bytes(), want.Data) {
				t.Fatalf("batch %d after the retries: %v", i, err)
			}
		}
	})

	// Stores and proxies that handle ranges badly: one that drops the
	// answer's Content-Range (the body is the range), one that ignores
	// Range (the body is the whole object). Both read back the same bytes
	// as the store itself.
	t.Run("RangesThroughProxies", func(t *testing.T) {
		target, err := url.Parse(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		direct, err := tier.Open(withEndpoint(t, u, endpoint, "ranges"))
		if err != nil {
			t.Fatal(err)
		}
		obj := make([]byte, 5000)
		for i := range obj {
			obj[i] = byte(i * 7)
		}
		if err := direct.Put(ctx, "r.seg", obj); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			resp func(*http.Response) error
		}{
			{name: "no Content-Range", resp: func(r *http.Response) error { r.Header.Del("Content-Range"); return nil }},
			{name: "Range ignored", resp: func(r *http.Response) error {
				if r.StatusCode != http.StatusPartialContent {
					return nil
				}
				// The range is signed, so the proxy cannot drop it from
				// the request: it answers as a store that ignored it.
				r.Body.Close()
				r.StatusCode, r.Status = http.StatusOK, "200 OK"
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(obj)), int64(len(obj))
				r.Header.Del("Content-Range")
				r.Header.Set("Content-Length", strconv.Itoa(len(obj)))
				return nil
			}},
		} {
			proxy := httputil.NewSingleHostReverseProxy(target)
			proxy.ModifyResponse = tc.resp
			srv := httptest.NewServer(proxy)
			st, err := tier.Open(withEndpoint(t, u, srv.URL, "ranges"))
			if err != nil {
				srv.Close()
				t.Fatal(err)
			}
			for _, r := range [][2]int64{{0, 100}, {1234, 100}, {4900, 100}} {
				got, err := st.ReadRange(ctx, "r.seg", r[0], r[1])
				if err != nil || !bytes.Equal(got, obj[r[0]:r[0]+r[1]]) {
					t.Errorf("%s: %d bytes at %d: %v (bytes equal: %v)", tc.name, r[1], r[0], err, bytes.Equal(got, obj[r[0]:r[0]+r[1]]))
				}
			}
			srv.Close()
		}
	})

	t.Run("ClusterMarker", func(t *testing.T) {
		ctx := context.Background()
		shared := withEndpoint(t, u, endpoint, "shared")
		stA, err := tier.Open(shared)
		if err != nil {
			t.Fatal(err)
		}
		a := tier.NewClaimedStore(stA, "cluster 00000000000000aa")
		if err := a.Claim(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Put(ctx, "topics/1/0/a.seg", []byte("a's history")); err != nil {
			t.Fatal(err)
		}
		stB, err := tier.Open(shared)
		if err != nil {
			t.Fatal(err)
		}
		b := tier.NewClaimedStore(stB, "cluster 00000000000000bb")
		err = b.Claim(ctx)
		var other *tier.OtherClusterError
		if !errors.As(err, &other) || !strings.Contains(err.Error(), "s3://rewind/shared/") ||
			!strings.Contains(err.Error(), "00000000000000aa") || !strings.Contains(err.Error(), "00000000000000bb") {
			t.Fatalf("a second cluster on the prefix: %v, want an OtherClusterError naming the prefix and both clusters", err)
		}
		if err := b.Delete(ctx, "topics/1/0/a.seg"); !errors.As(err, &other) {
			t.Fatalf("a delete by the second cluster: %v", err)
		}
		objs, err := stA.List(ctx, "")
		if err != nil || len(objs) != 2 || objs[0].Name != tier.MarkerName || objs[1].Name != "topics/1/0/a.seg" {
			t.Fatalf("the first cluster's objects: %+v %v", objs, err)
		}
		// The marker is written only if absent: a store that honours
		// If-None-Match refuses a second write.
		created, err := stB.(*tier.S3Store).PutIfAbsent(ctx, tier.MarkerName, []byte("cluster 00000000000000bb\n"))
		if err != nil || created {
			t.Fatalf("a conditional write over the marker: created %v, %v", created, err)
		}
		if err := a.Claim(ctx); err != nil {
			t.Fatalf("the first cluster again: %v", err)
		}
	})
}

// TestS3Addressing: path_style decides whether the bucket goes in the path
// or in the host name. The endpoint is under .invalid, a name that never
// resolves (RFC 6761), so the error names the host each request went to,
// and nothing leaves the machine.
func TestS3Addressing(t *testing.T) {
	s3test.Isolate(t, t.TempDir())
	t.Setenv("AWS_ACCESS_KEY_ID", "id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	for _, c := range []struct{ query, host string }{
		{"", "s3.invalid"}, // a custom endpoint: path style
		{"&path_style=true", "s3.invalid"},
		{"&path_style=false", "rewind.s3.invalid"},
	} {
		st, err := tier.Open("s3://rewind/history?endpoint=http://s3.invalid:9" + c.query)
		if err != nil {
			t.Fatal(err)
		}
		err = st.Put(context.Background(), "x", []byte("x"))
		if err == nil || !strings.Contains(err.Error(), "lookup "+c.host+":") && !strings.Contains(err.Error(), "lookup "+c.host+" ") {
			t.Errorf("%q: %v, want a failed lookup of %s", c.query, err, c.host)
		}
	}
}
