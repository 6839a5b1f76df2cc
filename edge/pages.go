package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/tunnel"
)

// problem is an error the edge answers itself.
type problem struct {
	status  int
	code    string
	title   string
	message string
	reload  bool // the "starting…" page reloads itself
	// retryAfter, when set, is sent as Retry-After (seconds).
	retryAfter int
	// rfc9457: a client that is not a browser gets
	// application/problem+json (RFC 9457), which also holds the API's
	// error object; ports, when set, is what listens in the sandbox
	// (listening.go).
	rfc9457 bool
	port    int // the URL's, for the problem's facts
	ports   *portFacts
	// start, on the Starting page, is where the start is: the page shows
	// it and follows it (starting.go).
	start *startStatus
}

var (
	errNotFound       = problem{status: http.StatusNotFound, code: "not_found", title: "No such URL", message: "Nothing is served at this address. Check the link, or ask its owner for a new one."}
	errTokenMissing   = problem{status: http.StatusUnauthorized, code: "token_required", title: "This URL is private", message: "Open it with the full link you were given (it carries a _token), or send the token in the X-Froog-Url-Token header."}
	errTokenInvalid   = problem{status: http.StatusUnauthorized, code: "token_invalid", title: "This link does not open this URL", message: "The token is wrong, revoked or expired. Ask the URL's owner for a new link."}
	errBadRequest     = problem{status: http.StatusBadRequest, code: "bad_request", title: "Bad request", message: "The edge could not read this request: its host, target or headers are malformed."}
	errRequestTimeout = problem{status: http.StatusRequestTimeout, code: "request_timeout", title: "Too slow", message: "The request's body came too slowly; the edge stopped waiting for it."}
	errBadAnswer      = problem{status: http.StatusBadGateway, code: "bad_gateway", title: "The app's answer was refused", message: "The app inside the sandbox answered with headers the edge does not pass on."}
	errForbidden      = problem{status: http.StatusForbidden, code: "forbidden", title: "Not allowed here", message: "The edge serves this sandbox's web app; it does not tunnel CONNECT requests."}
	errStopped        = problem{status: http.StatusServiceUnavailable, code: "sandbox_stopped", title: "This sandbox is stopped", message: "Its owner can start it again; this address will work as soon as it runs.", retryAfter: 5}
)

func errRateLimited(wait int) problem {
	return problem{status: http.StatusTooManyRequests, code: "rate_limited", title: "Too many requests",
		message: "Your network address sent more requests than the edge takes from one client. Try again in a few seconds.", retryAfter: wait}
}

func errBadGateway(port int) problem {
	return problem{status: http.StatusBadGateway, code: "bad_gateway", title: "Nothing is listening",
		message: "Nothing answered on port " + itoa(port) + " inside the sandbox. The service must listen on that port inside the sandbox (on localhost or 0.0.0.0).", rfc9457: true, port: port}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Start}}<noscript><meta http-equiv="refresh" content="5"></noscript>{{else if .Reload}}<meta http-equiv="refresh" content="5">{{end}}
<title>{{.Title}} · froog</title>
<style>
body{font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center;background:#f6f7f9;color:#1d2330}
main{max-width:34rem;margin:2rem;padding:2rem 2.25rem;background:#fff;border-radius:12px;box-shadow:0 1px 3px rgba(0,0,0,.08)}
h1{font-size:1.35rem;margin:0 0 .5rem}p{margin:.5rem 0;color:#4a5263}.ports,.stage{color:#1d2330;font-weight:500}.code{font:13px ui-monospace,monospace;color:#8a92a3}
@media (prefers-color-scheme:dark){body{background:#12151c;color:#e6e9ef}main{background:#1b1f29;box-shadow:none}p{color:#aab2c3}.ports,.stage{color:#e6e9ef}}
</style></head>
<body><main><h1>{{.Title}}</h1><p>{{.Message}}</p>{{if .Ports}}<p class="ports">{{.Ports}}</p>{{end}}{{with .Start}}<p class="stage"><span id="stage" data-version="{{.Version}}">{{if .Stage}}{{.Stage}}{{else}}{{.State}}{{end}}</span> · <span id="since" data-waited="{{$.Waited}}">{{$.Waited}} s</span></p>{{end}}<p class="code">{{.Status}} · {{.Code}}{{if .RequestID}} · {{.RequestID}}{{end}}</p></main>{{if .Start}}<script>{{.Script}}</script>{{end}}</body></html>
`))

// pageCSP allows the page's own inline style and nothing else.
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

// wantsHTML reports whether a request is a browser navigation, from its
// Sec-Fetch-Mode and Accept headers.
func wantsHTML(fetchMode, accept string) bool {
	return fetchMode == "navigate" || strings.Contains(accept, "text/html")
}

// headers gives the headers of p's answer, one call of set each.
func (p *problem) headers(html bool, set func(name, value string)) {
	set("Cache-Control", "no-store")
	set("Referrer-Policy", "no-referrer")
	set("X-Content-Type-Options", "nosniff")
	if p.retryAfter > 0 {
		set("Retry-After", itoa(p.retryAfter))
	}
	switch {
	case html && p.start != nil:
		set("Content-Type", "text/html; charset=utf-8")
		set("Content-Security-Policy", startingCSP)
	case html:
		set("Content-Type", "text/html; charset=utf-8")
		set("Content-Security-Policy", pageCSP)
	case p.rfc9457:
		set("Content-Type", "application/problem+json")
	default:
		set("Content-Type", "application/json")
	}
}

// body is p's answer: a small HTML page for a browser navigation, JSON in
// the API's error format for anything else.
func (p *problem) body(html bool, requestID string) []byte {
	var b bytes.Buffer
	ports := ""
	if p.ports != nil {
		ports = p.ports.sentence(p.port)
	}
	switch {
	case html:
		page.Execute(&b, map[string]any{"Title": p.title, "Message": p.message, "Ports": ports, "Status": p.status, "Code": p.code, "RequestID": requestID, "Reload": p.reload,
			"Start": p.start, "Waited": waited(p.start), "Script": template.JS(startScript)})
	case p.rfc9457:
		json.NewEncoder(&b).Encode(p.problemJSON(ports, requestID))
	default:
		json.NewEncoder(&b).Encode(map[string]any{"error": map[string]string{"code": p.code, "message": p.message, "request_id": requestID}})
	}
	return b.Bytes()
}

// waited is how long a Starting page's request was held, in seconds.
func waited(st *startStatus) int {
	if st == nil {
		return 0
	}
	return st.waited
}

// problemDoc is an RFC 9457 problem: its members (type about:blank, so
// the title is the status's), the edge's own
// (code, request_id, port; listening, more and elsewhere when the
// request may know them) and the API's error object, so that a client
// of either format reads it.
type problemDoc struct {
	Type      string            `json:"type"`
	Title     string            `json:"title"`
	Status    int               `json:"status"`
	Detail    string            `json:"detail"`
	Code      string            `json:"code"`
	RequestID string            `json:"request_id"`
	Port      int               `json:"port,omitempty"`
	Listening []int             `json:"listening,omitzero"` // [] when nothing listens
	More      int               `json:"more,omitempty"`
	Elsewhere []string          `json:"elsewhere,omitempty"`
	Error     map[string]string `json:"error"`
}

func (p *problem) problemJSON(ports, requestID string) problemDoc {
	detail := p.message
	if ports != "" {
		detail += " " + ports
	}
	d := problemDoc{Type: "about:blank", Title: http.StatusText(p.status), Status: p.status, Detail: detail, Code: p.code, RequestID: requestID, Port: p.port,
		Error: map[string]string{"code": p.code, "message": detail, "request_id": requestID}}
	if f := p.ports; f != nil {
		d.Listening, d.More = f.Listening, f.More
		for _, a := range f.Elsewhere {
			d.Elsewhere = append(d.Elsewhere, a.String())
		}
	}
	return d
}

// writeProblem answers r with p over net/http, outside the pipeline (the
// HTTP listener's redirects).
func writeProblem(w http.ResponseWriter, r *http.Request, p problem, requestID string) {
	html := wantsHTML(r.Header.Get("Sec-Fetch-Mode"), r.Header.Get("Accept"))
	p.headers(html, w.Header().Set)
	w.WriteHeader(p.status)
	w.Write(p.body(html, requestID))
}

// proxyProblem maps a failed exchange with the sandbox to the page to
// show. in is the request body as read from the client (nil: none): when
// reading it failed, the client broke the exchange, and gets a 400 that
// does not blame the sandbox. The log says what failed in the edge's own
// words: the errors of HTTP parsers quote the bytes they could not read,
// and those may hold a token.
func (s *Server) proxyProblem(rt *route.Route, port int, requestID string, err error, in *countingReader) problem {
	if in != nil && in.err != nil {
		var ne net.Error
		slow := errors.Is(in.err, errBodyTooSlow) || errors.As(in.err, &ne) && ne.Timeout()
		s.o.Logger.Info("proxy: the client's request body failed", slog.String("request_id", requestID), slog.String("sandbox", rt.SandboxID), slog.Bool("too_slow", slow))
		if slow {
			return errRequestTimeout
		}
		return errBadRequest
	}
	switch {
	case errors.Is(err, errAnswerRefused):
		return errBadAnswer
	case errors.Is(err, tunnel.ErrNotRunning):
		return errStopped
	case errors.Is(err, tunnel.ErrPortClosed): // expected while the app starts: no log line
		return s.notListening(rt, port, err)
	}
	s.o.Logger.Warn("proxy", slog.String("request_id", requestID), slog.String("sandbox", rt.SandboxID), slog.String("error", safeError(err)))
	return errBadGateway(port)
}

// safeError describes err for a log line without quoting the exchange.
func safeError(err error) string {
	var de *dialError
	var ne net.Error
	switch {
	case errors.As(err, &de):
		return "dial: " + de.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, net.ErrClosed):
		return "the app closed the connection"
	}
	return "the app's answer could not be read"
}
