package tier

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3 request defaults. The attempts and the backoff bound how long one
// call may retry a store that throttles (SlowDown) or fails (5xx,
// timeouts, refused connections): with full jitter, 6 attempts wait about
// 8 s in all on average and 15 s at most. AWS_MAX_ATTEMPTS overrides the
// attempts.
const (
	s3MaxAttempts    = 6
	s3MaxBackoff     = 10 * time.Second
	s3AttemptTimeout = 2 * time.Minute // one attempt, a 16 MiB upload included
	defaultS3Region  = "us-east-1"
	// s3CredentialsWindow is how long before temporary credentials expire
	// they are fetched again.
	s3CredentialsWindow = 5 * time.Minute
)

// S3Store keeps objects in a bucket of S3 or an S3-compatible store, under
// a prefix. Requests go through the AWS SDK for Go v2: its credential
// chain (refreshed before they expire), its SigV4 signing and its retries
// with backoff.
type S3Store struct {
	client   *s3.Client
	bucket   string
	prefix   string // ends with "/" unless empty
	endpoint string // the custom endpoint (URL, else environment), "" for AWS's own
	region   string
}

// NewS3Store returns a store for
// s3://bucket/prefix?endpoint=URL&region=R&path_style=BOOL&profile=P&credentials=FILE.
//
//   - Credentials come from the AWS SDK's default chain, each source
//     refreshed before it expires: the environment (AWS_ACCESS_KEY_ID,
//     AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); the shared files
//     (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, ~/.aws; profile
//     AWS_PROFILE or profile=); web identity (AWS_WEB_IDENTITY_TOKEN_FILE
//     and AWS_ROLE_ARN, as EKS's IRSA sets them: STS
//     AssumeRoleWithWebIdentity, at AWS_ENDPOINT_URL_STS if set); the
//     container endpoint (ECS); the instance's role (IMDSv2).
//     credentials=FILE names a shared credentials file to read instead of
//     AWS_SHARED_CREDENTIALS_FILE.
//   - The region is region=, else AWS_REGION, AWS_DEFAULT_REGION or the
//     profile's, else us-east-1.
//   - The endpoint is endpoint=, else AWS_ENDPOINT_URL_S3 or
//     AWS_ENDPOINT_URL, else AWS's for the region.
//   - path_style=true sends path-style requests (https://host/bucket/key),
//     false virtual-hosted ones (https://bucket.host/key). The default is
//     path style with a custom endpoint (most S3-compatible stores want
//     it) and virtual-hosted on AWS.
//
// Nothing is sent until the first call: a missing credential or an
// unreachable store shows there (the engine's first call is Claim).
func NewS3Store(u *url.URL) (*S3Store, error) {
	q := u.Query()
	if u.Host == "" {
		return nil, fmt.Errorf("tier: %s: no bucket (s3://bucket/prefix)", u.Redacted())
	}
	for k := range q {
		switch k {
		case "endpoint", "region", "path_style", "profile", "credentials":
		default:
			return nil, fmt.Errorf("tier: %s: unknown parameter %q (want endpoint, region, path_style, profile or credentials)", u.Redacted(), k)
		}
	}
	s := &S3Store{bucket: u.Host, prefix: strings.Trim(u.Path, "/"), endpoint: q.Get("endpoint")}
	if s.prefix != "" {
		s.prefix += "/"
	}
	for _, env := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if s.endpoint == "" {
			s.endpoint = os.Getenv(env)
		}
	}
	if s.endpoint != "" {
		e, err := url.Parse(s.endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, fmt.Errorf("tier: endpoint %q: want http(s)://host[:port]", s.endpoint)
		}
	}
	pathStyle := s.endpoint != ""
	if v := q.Get("path_style"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("tier: path_style=%q: want true or false", v)
		}
		pathStyle = b
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts, o.MaxBackoff = s3MaxAttempts, s3MaxBackoff
			})
		}),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(s3AttemptTimeout)),
		config.WithDefaultRegion(defaultS3Region),
		// Temporary credentials are fetched again once they have less
		// than this left, so no call starts with credentials about to
		// expire.
		config.WithCredentialsCacheOptions(func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = s3CredentialsWindow }),
	}
	if r := q.Get("region"); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	if p := q.Get("profile"); p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	if f := q.Get("credentials"); f != "" {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("tier: s3 credentials: %w", err)
		}
		opts = append(opts, config.WithSharedCredentialsFiles([]string{f}))
	}
	// LoadDefaultConfig reads the environment and the shared files; it
	// sends nothing (credentials are fetched on the first request).
	cfg, err := config.LoadDefaultConfig(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tier: s3 configuration: %w", err)
	}
	s.region = cfg.Region
	s.client = s3.NewFromConfig(cfg, func(o *s3.Options) {
		if s.endpoint != "" {
			o.BaseEndpoint = aws.String(s.endpoint)
		}
		o.UsePathStyle = pathStyle
		// Checksums only where S3 requires them: S3-compatible stores
		// differ in which trailing checksums they take, and every one
		// checks Content-MD5, which Put sends. Reads are checked by the
		// segment format's own CRCs.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return s, nil
}

func (s *S3Store) String() string {
	ep := s.endpoint
	if ep == "" {
		ep = s.region
	}
	return fmt.Sprintf("s3://%s/%s (%s)", s.bucket, s.prefix, ep)
}

func (s *S3Store) key(name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return "", fmt.Errorf("tier: invalid object name %q", name)
	}
	return s.prefix + name, nil
}

// s3Error maps a missing object (or bucket: S3 answers 404 for both) to
// ErrNotFound and adds the call to any other error, whose text names the
// store's status and reason (the SDK's "StatusCode: 403, ... api error
// SignatureDoesNotMatch: ...").
func s3Error(op, name string, err error) error {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
		return fmt.Errorf("%w: %s (%v)", ErrNotFound, name, apiCode(err))
	}
	return fmt.Errorf("tier: %s %s: %w", op, name, err)
}

// apiCode returns the store's error code, or the error's text.
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return err.Error()
}

// isPreconditionFailed reports a refused conditional write: 412, or 409
// ConditionalRequestConflict (S3 answers that to a put racing another
// conditional put of the same key).
func isPreconditionFailed(err error) bool {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusPreconditionFailed {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "PreconditionFailed" || ae.ErrorCode() == "ConditionalRequestConflict")
}

// CreateBucket creates the store's bucket; one that exists already (and
// is this identity's) is no error.
func (s *S3Store) CreateBucket(ctx context.Context) error {
	_, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("tier: create bucket %s: %w", s.bucket, err)
	}
	return nil
}

// Put uploads data with its Content-MD5, so the store refuses bytes that
// changed on the way.
func (s *S3Store) Put(ctx context.Context, name string, data []byte) error {
	_, err := s.put(ctx, name, data, false)
	return err
}

// put uploads data; ifAbsent makes it conditional (If-None-Match: *), and
// created reports whether this call wrote it.
func (s *S3Store) put(ctx context.Context, name string, data []byte, ifAbsent bool) (created bool, err error) {
	key, err := s.key(name)
	if err != nil {
		return false, err
	}
	sum := md5.Sum(data)
	in := &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		ContentMD5: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := s.client.PutObject(ctx, in); err != nil {
		if ifAbsent && isPreconditionFailed(err) {
			return false, nil
		}
		return false, s3Error("put", name, err)
	}
	return true, nil
}

// PutIfAbsent writes data under name unless an object is there already:
// a conditional put (If-None-Match: *), which S3 and most S3-compatible
// stores honour; created is false when the object existed. A store that
// ignores the condition overwrites (Claim says what that means).
func (s *S3Store) PutIfAbsent(ctx context.Context, name string, data []byte) (created bool, err error) {
	return s.put(ctx, name, data, true)
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
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)),
	})
	if err != nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable {
			return nil, fmt.Errorf("%w: %s: %d bytes at %d run past its end", ErrCorrupt, name, n, off)
		}
		return nil, s3Error("read", name, err)
	}
	defer out.Body.Close()
	if out.ContentRange == nil && aws.ToInt64(out.ContentLength) != n {
		// A store that ignores ranges sends the whole object (one that
		// answers the range but whose proxy dropped Content-Range sends n
		// bytes: the range). Nothing past the range is needed.
		all, err := io.ReadAll(io.LimitReader(out.Body, off+n))
		if err != nil {
			return nil, fmt.Errorf("tier: read %s: %w", name, err)
		}
		if int64(len(all)) < off+n {
			return nil, fmt.Errorf("%w: %s: %d bytes at %d run past its end", ErrCorrupt, name, n, off)
		}
		return all[off : off+n], nil
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(out.Body, buf); err != nil {
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
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return 0, s3Error("head", name, err)
	}
	if out.ContentLength == nil {
		return 0, fmt.Errorf("tier: head %s: no Content-Length", name)
	}
	return *out.ContentLength, nil
}

// List pages through ListObjectsV2.
func (s *S3Store) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix + prefix),
	}, func(o *s3.ListObjectsV2PaginatorOptions) {
		o.StopOnDuplicateToken = true // a faulty store that repeats a token ends the list, not loops
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("tier: list %s: %w", prefix, err)
		}
		for _, c := range page.Contents {
			o := Object{Name: strings.TrimPrefix(aws.ToString(c.Key), s.prefix), Size: aws.ToInt64(c.Size)}
			if c.LastModified != nil {
				o.Modified = *c.LastModified
			}
			out = append(out, o)
		}
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
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		if err = s3Error("delete", name, err); errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}
