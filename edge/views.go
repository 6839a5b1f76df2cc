package edge

import (
	"net/http"
	"strings"

	"froog.tech/froog/edge/route"
)

// serveView hands a request for a view host to Options.Views, and
// reports whether it was one. A view is served only on a connection made
// for it (SNI the same host): its page's cookies and websockets never
// share a connection with a URL's app, and a URL's requests never reach
// the views' server.
func (s *Server) serveView(w http.ResponseWriter, r *http.Request) bool {
	name, _, _ := route.SplitHostPort(r.Host)
	hostView := s.isView(name)
	sniView := r.TLS != nil && s.isView(r.TLS.ServerName)
	switch {
	case !hostView && !sniView:
		return false
	case hostView != sniView || r.TLS == nil || !strings.EqualFold(name, r.TLS.ServerName):
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "misdirected request", http.StatusMisdirectedRequest)
		return true
	}
	s.o.Views.ServeHTTP(w, r)
	return true
}
