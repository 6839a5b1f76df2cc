// Package contract checks /v1 responses against the API's OpenAPI
// document (api/openapi.json), for tests: the end-to-end suites (through
// Transport) and the api package's handler tests (through Check).
//
// The check is stricter than the document reads to a client, on purpose:
//   - a status the operation does not list fails (no "default");
//   - a header the response does not document fails, but for HTTP's own
//     framing headers and the ones the document's info says every
//     response carries (X-Request-Id, the RateLimit-* set);
//   - a field a response schema does not name fails: every object schema
//     with properties is checked as if it had additionalProperties: false
//     (the published document stays open, so clients may ignore fields a
//     later version adds);
//   - an unknown /v1 path must answer 404 with the error schema, and a
//     known path with a method it does not have 405 with the error schema
//     and an Allow header listing exactly the documented methods.
//
// It imports the api package for its document only, and nothing of the
// rest of froog.
package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"froog.tech/froog/api"
)

// everyResponse are the headers any response may carry without its
// operation naming them: HTTP's framing, and what the document's info
// says every /v1 response has.
var everyResponse = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Date": true, "Connection": true,
	"Transfer-Encoding": true, "X-Request-Id": true,
	"Ratelimit-Limit": true, "Ratelimit-Remaining": true, "Ratelimit-Reset": true, "Ratelimit-Policy": true,
}

// Checker holds the loaded document.
type Checker struct {
	doc     *openapi3.T
	mux     *http.ServeMux
	methods map[string][]string // path template → its methods
	errs    *openapi3.Schema    // the error body's schema
}

// match is what the mux found for a request.
type match struct {
	path   string // the document's path template; "" when none
	method bool   // the path has the request's method
	params map[string]string
}

type matchKey struct{}

var (
	loadOnce sync.Once
	loaded   *Checker
	loadErr  error
)

// Load parses and validates the API's document once and returns its
// checker.
func Load() (*Checker, error) {
	loadOnce.Do(func() { loaded, loadErr = New(api.OpenAPI()) })
	return loaded, loadErr
}

// New builds a checker for a document (JSON).
func New(doc []byte) (*Checker, error) {
	closed, err := closeObjects(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	l := openapi3.NewLoader()
	t, err := l.LoadFromData(closed)
	if err != nil {
		return nil, fmt.Errorf("load openapi document: %w", err)
	}
	if err := t.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi document is not valid: %w", err)
	}
	c := &Checker{doc: t, mux: http.NewServeMux(), methods: map[string][]string{}}
	if s := t.Components.Schemas["Error"]; s != nil {
		c.errs = s.Value
	} else {
		return nil, errors.New("openapi document: no Error schema")
	}
	for path, item := range t.Paths.Map() {
		for method := range item.Operations() {
			c.methods[path] = append(c.methods[path], method)
			c.mux.HandleFunc(method+" "+path, c.found(path, true))
		}
		slices.Sort(c.methods[path])
		c.mux.HandleFunc(path, c.found(path, false))
	}
	return c, nil
}

func (c *Checker) found(path string, method bool) http.HandlerFunc {
	return func(_ http.ResponseWriter, r *http.Request) {
		m := r.Context().Value(matchKey{}).(*match)
		m.path, m.method, m.params = path, method, map[string]string{}
		for _, seg := range strings.Split(path, "/") {
			if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
				name := seg[1 : len(seg)-1]
				m.params[name] = r.PathValue(name)
			}
		}
	}
}

func (c *Checker) route(req *http.Request) *match {
	m := &match{}
	r := req.Clone(context.WithValue(context.Background(), matchKey{}, m))
	r.Body = http.NoBody
	r.Host = ""
	if r.Method == http.MethodHead {
		r.Method = http.MethodGet // a HEAD is answered as the GET
	}
	c.mux.ServeHTTP(httptest.NewRecorder(), r)
	return m
}

// Applies reports whether a request is one the document describes (a
// path under /v1/).
func Applies(req *http.Request) bool { return strings.HasPrefix(req.URL.Path, "/v1/") }

// Check checks one response to req: its status, headers and body. Its
// error never shows one of the API's secrets.
func (c *Checker) Check(req *http.Request, status int, header http.Header, body []byte) error {
	if err := c.check(req, status, header, body); err != nil {
		return errors.New(secretish.ReplaceAllString(err.Error(), "${1}_…"))
	}
	return nil
}

func (c *Checker) check(req *http.Request, status int, header http.Header, body []byte) error {
	if !Applies(req) {
		return nil
	}
	where := req.Method + " " + req.URL.Path
	m := c.route(req)
	switch {
	case m.path == "":
		if status != http.StatusNotFound {
			return fmt.Errorf("%s: no such path in the document, yet it answered %d", where, status)
		}
		return c.checkError(where, status, header, body, nil)
	case !m.method:
		if status != http.StatusMethodNotAllowed {
			return fmt.Errorf("%s: the document has no %s for %s, yet it answered %d", where, req.Method, m.path, status)
		}
		want := strings.Join(c.methods[m.path], ", ")
		if got := header.Get("Allow"); !sameMethods(got, c.methods[m.path]) {
			return fmt.Errorf("%s: 405 with Allow %q, want %q", where, got, want)
		}
		return c.checkError(where, status, header, body, map[string]bool{"Allow": true})
	}
	item := c.doc.Paths.Value(m.path)
	op := item.GetOperation(req.Method)
	if req.Method == http.MethodHead && op == nil {
		op = item.Get
	}
	ref := op.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("%s: status %d is not documented for %s %s: %s", where, status, req.Method, m.path, clip(body))
	}
	res := ref.Value
	if err := checkHeaders(where, status, header, res.Headers, nil); err != nil {
		return err
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: m.params,
			Route:      &routers.Route{Spec: c.doc, Path: m.path, PathItem: item, Method: req.Method, Operation: op},
		},
		Status:  status,
		Header:  header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.Options.WithCustomSchemaErrorFunc(short)
	ct, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	if ct == ndjson || binary[ct] {
		// Lines are checked one by one; bytes have nothing to check
		// but their content type.
		in.Options.ExcludeResponseBody = true
		if res.Content.Get(ct) == nil {
			return fmt.Errorf("%s: %d answered %s, which is not documented", where, status, ct)
		}
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s: %d against the document: %w: %s", where, status, err, clip(body))
	}
	if ct == ndjson {
		return c.checkLines(where, status, res, body)
	}
	return nil
}

const ndjson = "application/x-ndjson"

// binary are the content types of bytes (files, archives), and of
// server-sent events (a followed list, which ends when its client goes):
// their content type is checked, not their body.
var binary = map[string]bool{"application/octet-stream": true, "application/gzip": true, "text/event-stream": true}

// checkLines checks each line of an NDJSON stream against the schema the
// document gives the stream's content.
func (c *Checker) checkLines(where string, status int, res *openapi3.Response, body []byte) error {
	mt := res.Content.Get(ndjson)
	if mt == nil {
		return fmt.Errorf("%s: %d answered %s, which is not documented", where, status, ndjson)
	}
	for line := range bytes.Lines(body) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			return fmt.Errorf("%s: an NDJSON line is not JSON: %w: %s", where, err, clip(line))
		}
		if mt.Schema == nil {
			continue
		}
		if err := mt.Schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse(), openapi3.MultiErrors(), openapi3.SetSchemaErrorMessageCustomizer(short)); err != nil {
			return fmt.Errorf("%s: an NDJSON line against the document: %w: %s", where, err, clip(line))
		}
	}
	return nil
}

// checkError checks an answer given outside any operation (no such path,
// a method the path does not have): the error body, and no header but
// the ones every response has and extra.
func (c *Checker) checkError(where string, status int, header http.Header, body []byte, extra map[string]bool) error {
	if err := checkHeaders(where, status, header, nil, extra); err != nil {
		return err
	}
	if ct, _, _ := mime.ParseMediaType(header.Get("Content-Type")); ct != "application/json" {
		return fmt.Errorf("%s: %d with Content-Type %q, want application/json", where, status, ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("%s: %d body is not JSON: %w: %s", where, status, err, clip(body))
	}
	if err := c.errs.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse(), openapi3.MultiErrors(), openapi3.SetSchemaErrorMessageCustomizer(short)); err != nil {
		return fmt.Errorf("%s: %d body against the Error schema: %w: %s", where, status, err, clip(body))
	}
	return nil
}

// checkHeaders fails on a header neither documented for the response nor
// one every response has.
func checkHeaders(where string, status int, header http.Header, documented openapi3.Headers, extra map[string]bool) error {
	var unknown []string
	for name := range header {
		name = http.CanonicalHeaderKey(name)
		if everyResponse[name] || extra[name] {
			continue
		}
		if slices.ContainsFunc(keys(documented), func(d string) bool { return strings.EqualFold(d, name) }) {
			continue
		}
		unknown = append(unknown, name)
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("%s: %d has headers the document does not name: %s", where, status, strings.Join(unknown, ", "))
	}
	return nil
}

func keys(h openapi3.Headers) []string {
	out := make([]string, 0, len(h))
	for k := range h {
		out = append(out, k)
	}
	return out
}

// sameMethods reports whether an Allow value lists exactly methods (HEAD
// may come with GET).
func sameMethods(allow string, methods []string) bool {
	got := map[string]bool{}
	for _, m := range strings.Split(allow, ",") {
		if m = strings.TrimSpace(m); m != "" {
			got[m] = true
		}
	}
	if got["HEAD"] && slices.Contains(methods, "GET") {
		delete(got, "HEAD")
	}
	if len(got) != len(methods) {
		return false
	}
	for _, m := range methods {
		if !got[m] {
			return false
		}
	}
	return true
}

// short says where and what, without the schema kin-openapi would print
// whole.
func short(e *openapi3.SchemaError) string {
	at := "/" + strings.Join(e.JSONPointer(), "/")
	msg := at + ": " + e.Reason
	if e.Reason == "" {
		msg = at + ": does not match " + e.SchemaField
	}
	if e.Origin != nil { // a oneOf's: why each branch failed
		msg += " (" + e.Origin.Error() + ")"
	}
	return msg
}

// secretish is what the API's secrets look like (API keys, URL and
// viewer tokens, desktop links, file links): a contract error shows the
// body it is about, never one of those.
var secretish = regexp.MustCompile(`\b(froog|pt|pvt|dt|ft)_[A-Za-z0-9_-]{8,}`)

// clip is a body for an error message: its start.
func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// closeObjects marks every object schema with properties and no word on
// other fields additionalProperties: false, so a field the document does
// not name fails the check.
func closeObjects(doc []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	var walk func(any)
	walk = func(n any) {
		switch n := n.(type) {
		case map[string]any:
			if props, ok := n["properties"].(map[string]any); ok && len(props) > 0 {
				if _, set := n["additionalProperties"]; !set {
					n["additionalProperties"] = false
				}
			}
			for _, c := range n {
				walk(c)
			}
		case []any:
			for _, c := range n {
				walk(c)
			}
		}
	}
	walk(v)
	return json.Marshal(v)
}

// Transport checks every /v1 response that passes through it. A response
// that breaks the contract comes back as an error of RoundTrip (so the
// request fails where it was made) and is kept for Violations. A stream
// (NDJSON) is checked line by line as it is read, and fails its read.
type Transport struct {
	Checker *Checker
	Next    http.RoundTripper

	mu         sync.Mutex
	checked    int
	violations []string
}

// Checked is how many /v1 answers it has checked so far.
func (t *Transport) Checked() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.checked
}

func (t *Transport) count() {
	t.mu.Lock()
	t.checked++
	t.mu.Unlock()
}

// Violations lists the responses that broke the contract so far.
func (t *Transport) Violations() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.violations)
}

func (t *Transport) fail(err error) error {
	t.mu.Lock()
	t.violations = append(t.violations, err.Error())
	t.mu.Unlock()
	return fmt.Errorf("contract: %w", err)
}

// RoundTrip sends req and checks its answer.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.Next.RoundTrip(req)
	if err != nil || !Applies(req) || req.URL.Scheme != "http" {
		return res, err
	}
	t.count()
	ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if ct == ndjson && res.StatusCode == http.StatusOK {
		// The header and status now, each line as it arrives.
		if err := t.Checker.Check(req, res.StatusCode, res.Header, nil); err != nil {
			res.Body.Close()
			return nil, t.fail(err)
		}
		res.Body = &lineCheck{t: t, req: req, status: res.StatusCode, header: res.Header, body: res.Body}
		return res, nil
	}
	if binary[ct] {
		// Bytes (a download) pass as they come: read whole, a slow or
		// broken download would fail at the request, not at its read.
		if err := t.Checker.Check(req, res.StatusCode, res.Header, nil); err != nil {
			res.Body.Close()
			return nil, t.fail(err)
		}
		return res, nil
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	if err := t.Checker.Check(req, res.StatusCode, res.Header, body); err != nil {
		return nil, t.fail(err)
	}
	return res, nil
}

// lineCheck checks an NDJSON body's complete lines as they are read.
type lineCheck struct {
	t      *Transport
	req    *http.Request
	status int
	header http.Header
	body   io.ReadCloser
	buf    []byte
}

func (l *lineCheck) Read(p []byte) (int, error) {
	n, err := l.body.Read(p)
	l.buf = append(l.buf, p[:n]...)
	if i := bytes.LastIndexByte(l.buf, '\n'); i >= 0 || err == io.EOF {
		whole := l.buf
		if err != io.EOF {
			whole = l.buf[:i+1]
		}
		if cerr := l.t.Checker.Check(l.req, l.status, l.header, whole); cerr != nil {
			return n, l.t.fail(cerr)
		}
		l.buf = append(l.buf[:0], l.buf[len(whole):]...)
	}
	return n, err
}

func (l *lineCheck) Close() error { return l.body.Close() }
