package edge

import (
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
)

// problem is an error the edge answers itself.
type problem struct {
	status  int
	code    string
	title   string
	message string
	reload  bool // the "starting…" page reloads itself
}

var (
	errNotFound     = problem{http.StatusNotFound, "not_found", "No such URL", "Nothing is served at this address. Check the link, or ask its owner for a new one.", false}
	errTokenMissing = problem{http.StatusUnauthorized, "token_required", "This URL is private", "Open it with the full link you were given (it carries a _token), or send the token in the X-Froog-Url-Token header.", false}
	errTokenInvalid = problem{http.StatusUnauthorized, "token_invalid", "This link does not open this URL", "The token is wrong, revoked or expired. Ask the URL's owner for a new link.", false}
	errStopped      = problem{http.StatusServiceUnavailable, "sandbox_stopped", "This sandbox is stopped", "Its owner can start it again; this address will work as soon as it runs.", false}
)

func errBadGateway(port int) problem {
	return problem{http.StatusBadGateway, "bad_gateway", "Nothing is listening",
		"Nothing answered on port " + itoa(port) + " inside the sandbox. The service must listen on that port inside the sandbox (on localhost or 0.0.0.0).", false}
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
{{if .Reload}}<meta http-equiv="refresh" content="5">{{end}}
<title>{{.Title}} · froog</title>
<style>
body{font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center;background:#f6f7f9;color:#1d2330}
main{max-width:34rem;margin:2rem;padding:2rem 2.25rem;background:#fff;border-radius:12px;box-shadow:0 1px 3px rgba(0,0,0,.08)}
h1{font-size:1.35rem;margin:0 0 .5rem}p{margin:.5rem 0;color:#4a5263}.code{font:13px ui-monospace,monospace;color:#8a92a3}
@media (prefers-color-scheme:dark){body{background:#12151c;color:#e6e9ef}main{background:#1b1f29;box-shadow:none}p{color:#aab2c3}}
</style></head>
<body><main><h1>{{.Title}}</h1><p>{{.Message}}</p><p class="code">{{.Status}} · {{.Code}}{{if .RequestID}} · {{.RequestID}}{{end}}</p></main></body></html>
`))

// pageCSP allows the page's own inline style and nothing else.
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

// wantsHTML reports whether a request is a browser navigation.
func wantsHTML(r *http.Request) bool {
	return r.Header.Get("Sec-Fetch-Mode") == "navigate" || strings.Contains(r.Header.Get("Accept"), "text/html")
}

// render answers with p: a small HTML page to a browser navigation, JSON
// in the API's error format to anything else.
func render(w http.ResponseWriter, r *http.Request, p problem, requestID string) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	if p.status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "5")
	}
	if wantsHTML(r) {
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", pageCSP)
		w.WriteHeader(p.status)
		page.Execute(w, map[string]any{"Title": p.title, "Message": p.message, "Status": p.status, "Code": p.code, "RequestID": requestID, "Reload": p.reload})
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(p.status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": p.code, "message": p.message, "request_id": requestID}})
}
