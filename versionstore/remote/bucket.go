package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// ErrNotFound is wrapped by errors for a key the bucket does not hold.
var ErrNotFound = errors.New("not in the bucket")

// ErrPrecondition is wrapped by errors for a conditional write the bucket
// refused: the object changed (If-Match) or exists (If-None-Match).
var ErrPrecondition = errors.New("the object changed meanwhile")

// Location is where a workspace's history lives: s3://BUCKET/PREFIX.
type Location struct {
	Bucket string
	Prefix string // without a trailing slash; may be empty
}

// ParseLocation reads s3://BUCKET[/PREFIX].
func ParseLocation(s string) (Location, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return Location{}, fmt.Errorf("remote %q: not s3://BUCKET/PREFIX", s)
	}
	return Location{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}, nil
}

func (l Location) String() string {
	if l.Prefix == "" {
		return "s3://" + l.Bucket
	}
	return "s3://" + l.Bucket + "/" + l.Prefix
}

// key is name under the location's prefix.
func (l Location) key(name string) string {
	if l.Prefix == "" {
		return name
	}
	return l.Prefix + "/" + name
}

// Counts are the requests a Bucket made and the bytes it sent, for tests
// and benchmarks.
type Counts struct {
	Puts, Gets, PutBytes int64
}

// Bucket is an S3 bucket under a prefix.
type Bucket struct {
	loc    Location
	client *s3.Client
	puts   atomic.Int64
	gets   atomic.Int64
	bytes  atomic.Int64
}

// OpenBucket makes a client for loc from the standard AWS configuration
// chain (environment, shared config and credentials files). A custom
// endpoint (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL) is an S3-compatible
// server, addressed by path. Checksums are computed and checked only where
// an operation requires them: the SDK's default CRC32 headers are refused
// by several S3-compatible servers.
func OpenBucket(ctx context.Context, loc Location) (*Bucket, error) {
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired))
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // S3-compatible servers take any
	}
	pathStyle := os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle })
	return &Bucket{loc: loc, client: client}, nil
}

// Location is where the bucket's history lives.
func (b *Bucket) Location() Location { return b.loc }

// Counts are the requests made so far.
func (b *Bucket) Counts() Counts {
	return Counts{Puts: b.puts.Load(), Gets: b.gets.Load(), PutBytes: b.bytes.Load()}
}

// Get returns the object at name and its ETag; rng, if not empty, is an
// HTTP byte range ("bytes=0-99").
func (b *Bucket) Get(ctx context.Context, name, rng string) ([]byte, string, error) {
	b.gets.Add(1)
	in := &s3.GetObjectInput{Bucket: &b.loc.Bucket, Key: aws.String(b.loc.key(name))}
	if rng != "" {
		in.Range = &rng
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		return nil, "", b.fault("get", name, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", b.loc.key(name), err)
	}
	return data, aws.ToString(out.ETag), nil
}

// Condition makes a Put conditional: IfNoneMatch "*" creates only, IfMatch
// replaces only the object with that ETag.
type Condition struct {
	IfNoneMatch string
	IfMatch     string
}

// Put writes data at name, under cond, and returns the new ETag.
func (b *Bucket) Put(ctx context.Context, name string, data []byte, cond Condition) (string, error) {
	b.puts.Add(1)
	in := &s3.PutObjectInput{Bucket: &b.loc.Bucket, Key: aws.String(b.loc.key(name)),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))}
	if cond.IfNoneMatch != "" {
		in.IfNoneMatch = &cond.IfNoneMatch
	}
	if cond.IfMatch != "" {
		in.IfMatch = &cond.IfMatch
	}
	out, err := b.client.PutObject(ctx, in)
	if err != nil {
		return "", b.fault("put", name, err)
	}
	b.bytes.Add(int64(len(data)))
	return aws.ToString(out.ETag), nil
}

// fault wraps err, naming the sentinels it stands for.
func (b *Bucket) fault(verb, name string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%s %s: %w", verb, b.loc.key(name), ErrNotFound)
		case "PreconditionFailed", "ConditionalRequestConflict":
			return fmt.Errorf("%s %s: %w", verb, b.loc.key(name), ErrPrecondition)
		}
	}
	return fmt.Errorf("%s %s: %w", verb, b.loc.key(name), err)
}
