package edge

import (
	"net/http"
	"strings"

	"froog.tech/froog/names"
)

// serveView serves a request on a connection made for a view host (its
// SNI one: listen.go's handshake sends it here, and nothing else does)
// with Options.Views. Its Host must be that view: a view's cookies and
// websockets never share a connection with a URL's app or another
// view's (421 otherwise). A view host asked on a URL's connection is not
// a route (404).
func (s *Server) serveView(w http.ResponseWriter, r *http.Request) {
	name, _, _ := names.SplitHostPort(r.Host)
	if r.TLS == nil || !strings.EqualFold(name, r.TLS.ServerName) {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "misdirected request", http.StatusMisdirectedRequest)
		return
	}
	s.o.Views.ServeHTTP(w, r)
}
