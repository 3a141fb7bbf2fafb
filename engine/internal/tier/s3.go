package tier

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// S3Store keeps objects in a bucket of an S3-compatible store, under a
// prefix, with path-style requests signed with AWS Signature Version 4.
// It needs five calls: PUT, GET with a range, HEAD, DELETE and
// ListObjectsV2.
type S3Store struct {
	endpoint *url.URL // scheme and host, e.g. http://127.0.0.1:8333
	bucket   string
	prefix   string // ends with "/" unless empty
	region   string
	creds    Credentials
	client   *http.Client
	now      func() time.Time
}

// Credentials sign requests.
type Credentials struct {
	AccessKey, SecretKey, SessionToken string
}

// NewS3Store returns a store for s3://bucket/prefix?endpoint=URL&region=R.
// The endpoint defaults to https://s3.<region>.amazonaws.com and the region
// to us-east-1; credentials come from AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or from the file named by
// the URL's credentials parameter (lines access_key=, secret_key=,
// session_token=, as in an AWS credentials file's section).
func NewS3Store(u *url.URL) (*S3Store, error) {
	q := u.Query()
	if u.Host == "" {
		return nil, fmt.Errorf("tier: %s: no bucket (s3://bucket/prefix)", u.Redacted())
	}
	s := &S3Store{bucket: u.Host, prefix: strings.Trim(u.Path, "/"), region: q.Get("region"), now: time.Now}
	if s.prefix != "" {
		s.prefix += "/"
	}
	if s.region == "" {
		s.region = "us-east-1"
	}
	ep := q.Get("endpoint")
	if ep == "" {
		ep = "https://s3." + s.region + ".amazonaws.com"
	}
	e, err := url.Parse(ep)
	if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
		return nil, fmt.Errorf("tier: endpoint %q: want http(s)://host[:port]", ep)
	}
	s.endpoint = &url.URL{Scheme: e.Scheme, Host: e.Host}
	if f := q.Get("credentials"); f != "" {
		c, err := readCredentials(f)
		if err != nil {
			return nil, err
		}
		s.creds = c
	} else {
		s.creds = Credentials{AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
			SessionToken: os.Getenv("AWS_SESSION_TOKEN")}
	}
	if s.creds.AccessKey == "" || s.creds.SecretKey == "" {
		return nil, errors.New("tier: s3: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or credentials=FILE in the URL")
	}
	s.client = &http.Client{Timeout: 2 * time.Minute}
	return s, nil
}

// readCredentials reads key=value lines (AWS credentials file style: the
// aws_ prefix is optional; sections and comments are ignored).
func readCredentials(path string) (Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Credentials{}, fmt.Errorf("tier: s3 credentials: %w", err)
	}
	var c Credentials
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch strings.TrimPrefix(strings.TrimSpace(strings.ToLower(k)), "aws_") {
		case "access_key_id", "access_key":
			c.AccessKey = strings.TrimSpace(v)
		case "secret_access_key", "secret_key":
			c.SecretKey = strings.TrimSpace(v)
		case "session_token":
			c.SessionToken = strings.TrimSpace(v)
		}
	}
	return c, nil
}

func (s *S3Store) String() string {
	return fmt.Sprintf("s3://%s/%s (%s)", s.bucket, s.prefix, s.endpoint)
}

func (s *S3Store) key(name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return "", fmt.Errorf("tier: invalid object name %q", name)
	}
	return s.prefix + name, nil
}

// do sends a signed request for key (empty: the bucket) and returns the
// response; a status outside ok is an error carrying the body's message.
func (s *S3Store) do(ctx context.Context, method, key string, query url.Values, hdr http.Header, body []byte, ok ...int) (*http.Response, error) {
	u := *s.endpoint
	u.Path = "/" + s.bucket
	if key != "" {
		u.Path += "/" + key
	}
	u.RawPath = uriEncode(u.Path, false)
	u.RawQuery = canonicalQuery(query)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	req.ContentLength = int64(len(body))
	s.sign(req, body, s.now())
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("tier: %s %s: %w", method, key, err)
	}
	for _, c := range ok {
		if resp.StatusCode == c {
			return resp, nil
		}
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%w: %s (%s)", ErrNotFound, key, s3Message(msg))
	}
	return nil, fmt.Errorf("tier: %s %s: %s: %s", method, key, resp.Status, s3Message(msg))
}

// s3Message extracts <Code> and <Message> from an S3 error body.
func s3Message(body []byte) string {
	var e struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	if xml.Unmarshal(body, &e) == nil && e.Code != "" {
		return e.Code + ": " + e.Message
	}
	return strings.TrimSpace(string(body))
}

// CreateBucket creates the store's bucket; one that exists already is no
// error.
func (s *S3Store) CreateBucket(ctx context.Context) error {
	resp, err := s.do(ctx, http.MethodPut, "", nil, nil, nil, http.StatusOK, http.StatusConflict)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Put uploads data with its SHA-256 signed, so the store refuses bytes
// that changed on the way.
func (s *S3Store) Put(ctx context.Context, name string, data []byte) error {
	key, err := s.key(name)
	if err != nil {
		return err
	}
	resp, err := s.do(ctx, http.MethodPut, key, nil, nil, data, http.StatusOK)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// ReadRange reads n bytes at off with a ranged GET.
func (s *S3Store) ReadRange(ctx context.Context, name string, off, n int64) ([]byte, error) {
	key, err := s.key(name)
	if err != nil {
		return nil, err
	}
	if off < 0 || n <= 0 {
		return nil, fmt.Errorf("tier: read %s: bad range %d+%d", name, off, n)
	}
	hdr := http.Header{"Range": {fmt.Sprintf("bytes=%d-%d", off, off+n-1)}}
	resp, err := s.do(ctx, http.MethodGet, key, nil, hdr, nil, http.StatusPartialContent, http.StatusOK)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		// A store that ignores ranges sends the whole object.
		all, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("tier: read %s: %w", name, err)
		}
		if int64(len(all)) < off+n {
			return nil, fmt.Errorf("%w: %s: %d bytes at %d run past its end", ErrCorrupt, name, n, off)
		}
		return all[off : off+n], nil
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		return nil, fmt.Errorf("%w: %s: %d bytes at %d: %v", ErrCorrupt, name, n, off, err)
	}
	return buf, nil
}

// Size asks with HEAD.
func (s *S3Store) Size(ctx context.Context, name string) (int64, error) {
	key, err := s.key(name)
	if err != nil {
		return 0, err
	}
	resp, err := s.do(ctx, http.MethodHead, key, nil, nil, nil, http.StatusOK)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	n, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("tier: head %s: no Content-Length", name)
	}
	return n, nil
}

// List pages through ListObjectsV2.
func (s *S3Store) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	token := ""
	for {
		q := url.Values{"list-type": {"2"}, "prefix": {s.prefix + prefix}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		resp, err := s.do(ctx, http.MethodGet, "", q, nil, nil, http.StatusOK)
		if err != nil {
			return nil, err
		}
		var page struct {
			Contents []struct {
				Key          string    `xml:"Key"`
				Size         int64     `xml:"Size"`
				LastModified time.Time `xml:"LastModified"`
			} `xml:"Contents"`
			IsTruncated           bool   `xml:"IsTruncated"`
			NextContinuationToken string `xml:"NextContinuationToken"`
		}
		err = xml.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("tier: list %s: %w", prefix, err)
		}
		for _, c := range page.Contents {
			out = append(out, Object{Name: strings.TrimPrefix(c.Key, s.prefix), Size: c.Size, Modified: c.LastModified})
		}
		if !page.IsTruncated || page.NextContinuationToken == "" {
			break
		}
		token = page.NextContinuationToken
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete removes the object (S3 answers 204 for a missing one too).
func (s *S3Store) Delete(ctx context.Context, name string) error {
	key, err := s.key(name)
	if err != nil {
		return err
	}
	resp, err := s.do(ctx, http.MethodDelete, key, nil, nil, nil, http.StatusNoContent, http.StatusOK)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// sign adds the AWS Signature Version 4 headers to req.
func (s *S3Store) sign(req *http.Request, body []byte, now time.Time) {
	signV4(req, body, now, s.region, s.creds)
}

func signV4(req *http.Request, body []byte, now time.Time, region string, c Credentials) {
	now = now.UTC()
	amzDate := now.Format("20060102T150405Z")
	day := now.Format("20060102")
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payload)
	if c.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", c.SessionToken)
	}
	headers := map[string]string{"host": req.URL.Host}
	for k, vs := range req.Header {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-amz-") || lk == "range" || lk == "content-type" || lk == "content-md5" {
			headers[lk] = strings.TrimSpace(strings.Join(vs, ","))
		}
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	var canonHeaders strings.Builder
	for _, k := range names {
		canonHeaders.WriteString(k + ":" + headers[k] + "\n")
	}
	signed := strings.Join(names, ";")
	canonical := strings.Join([]string{req.Method, uriEncode(req.URL.Path, false), req.URL.RawQuery,
		canonHeaders.String(), signed, payload}, "\n")
	scope := day + "/" + region + "/s3/aws4_request"
	crHash := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(crHash[:])
	key := hmacSHA256([]byte("AWS4"+c.SecretKey), day)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, "s3")
	key = hmacSHA256(key, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(key, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+c.AccessKey+"/"+scope+
		",SignedHeaders="+signed+",Signature="+sig)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// uriEncode percent-encodes s as SigV4 wants: every byte but the unreserved
// characters, and '/' too unless it separates path segments.
func uriEncode(s string, encodeSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// canonicalQuery encodes q sorted by key, as both the request and the
// signature use it.
func canonicalQuery(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		vs := append([]string(nil), q[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			parts = append(parts, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	return strings.Join(parts, "&")
}
