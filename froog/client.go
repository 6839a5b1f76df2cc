package froog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// DefaultURL is froog's API when neither Options.URL nor FROOG_API_URL says
// otherwise.
const DefaultURL = "https://api.froog.tech"

// Options configure a Client. Every zero value has a meaning.
type Options struct {
	// APIKey is sent as a bearer token; empty: FROOG_API_KEY.
	APIKey string
	// URL is the API's address, without /v1; empty: FROOG_API_URL, else
	// DefaultURL.
	URL string
	// HTTPClient makes the requests; nil: http.DefaultClient.
	HTTPClient HttpRequestDoer
	// Retries is how many times a 429 or 503 answer is retried after its
	// Retry-After; 0: 3, negative: never.
	Retries int
	// MaxRetryWait is the longest Retry-After waited for; a longer one is
	// returned as the *Error at once. 0: one minute.
	MaxRetryWait time.Duration
	// UserAgent names the program; empty: "froog-go".
	UserAgent string
}

// Client is froog's API. Its flat methods (one per operation, named after
// its operationId) are the generated ones; Sandbox and Sandboxes are the
// handle style on top of them.
type Client struct {
	*ClientWithResponses
	// Sandboxes creates and lists sandboxes.
	Sandboxes Sandboxes
	// raw is the generated client without response parsing, for streams.
	raw *API
}

// New is NewWithOptions with only the API key (empty: FROOG_API_KEY); it
// panics only if FROOG_API_URL is not a URL.
func New(apiKey string) *Client {
	c, err := NewWithOptions(Options{APIKey: apiKey})
	if err != nil {
		panic(err)
	}
	return c
}

// NewWithOptions makes a Client; it sends nothing.
func NewWithOptions(o Options) (*Client, error) {
	if o.APIKey == "" {
		o.APIKey = os.Getenv("FROOG_API_KEY")
	}
	if o.URL == "" {
		o.URL = os.Getenv("FROOG_API_URL")
	}
	if o.URL == "" {
		o.URL = DefaultURL
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("froog: the API URL %q is not an http or https address", o.URL)
	}
	o.URL = strings.TrimSuffix(strings.TrimSuffix(o.URL, "/"), "/v1")
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	switch {
	case o.Retries == 0:
		o.Retries = 3
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.MaxRetryWait == 0 {
		o.MaxRetryWait = time.Minute
	}
	if o.UserAgent == "" {
		o.UserAgent = "froog-go"
	}
	d := &doer{next: o.HTTPClient, key: o.APIKey, agent: o.UserAgent, retries: o.Retries, maxWait: o.MaxRetryWait, sleep: sleep}
	raw, err := NewClient(o.URL, WithHTTPClient(d))
	if err != nil {
		return nil, fmt.Errorf("froog: %w", err)
	}
	c := &Client{ClientWithResponses: &ClientWithResponses{ClientInterface: raw}, raw: raw}
	c.Sandboxes = Sandboxes{c: c}
	return c, nil
}

// Ptr returns a pointer to v, for the generated types' optional fields.
func Ptr[T any](v T) *T { return &v }

// doer is the one place every request passes: it adds the key, retries
// 429 and 503 after their Retry-After, and turns every answer of 400 or
// more into an *Error (so the generated calls return it as their error).
type doer struct {
	next    HttpRequestDoer
	key     string
	agent   string
	retries int
	maxWait time.Duration
	sleep   func(context.Context, time.Duration) error
}

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	if d.key != "" {
		req.Header.Set("Authorization", "Bearer "+d.key)
	}
	req.Header.Set("User-Agent", d.agent)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			body, err := req.GetBody()
			if err != nil {
				return nil, fmt.Errorf("froog: %s %s: rewind the body for a retry: %w", req.Method, req.URL.Path, err)
			}
			req.Body = body
		}
		res, err := d.next.Do(req)
		if err != nil {
			// A *url.Error's text holds the whole URL, and signed file
			// links carry their token in the query: name the path only.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, fmt.Errorf("froog: %s %s: %w", req.Method, req.URL.Path, err)
		}
		if res.StatusCode < 400 {
			return res, nil
		}
		e := readError(res)
		retryable := (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable) &&
			attempt < d.retries && e.RetryAfter <= d.maxWait && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil)
		if !retryable {
			return nil, e
		}
		if err := d.sleep(req.Context(), e.RetryAfter); err != nil {
			return nil, e
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// idempotencyKey is a new random Idempotency-Key: one per call, so the
// doer's retries of that call replay rather than create twice.
func idempotencyKey() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "froog-go-" + hex.EncodeToString(b)
}
