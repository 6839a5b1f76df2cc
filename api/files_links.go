package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"froog.tech/froog/store"
)

// Signed file links (POST files/download-url, files/upload-url) GET a
// file or take a PUT of its bytes with no Authorization header. They are
// served by the API itself, on /v1/files/download and /v1/files/upload,
// with the link's token in the query (the access log leaves queries out,
// and no error repeats it). The token is sealed (AES-GCM with the API's
// secret key, which every API process shares): it names the sandbox (by
// id: a rename keeps the link, a new sandbox of the same name does not
// get it), the path, the way (get or put), the expiry, the key that made
// it (its id) and when. The key is looked up at each use: a link stops
// working when its key no longer vouches for it (revoked, expired, or
// rotated since: store.APIKey.Vouches), loses the action, or no longer
// reaches the sandbox. Nothing is stored.

// Link lifetimes (the docs: 15 minutes by default, 60 s to 24 h).
const (
	linkDefault = 15 * time.Minute
	linkMin     = 60
	linkMax     = 24 * 60 * 60
	maxToken    = 8 << 10
)

// linkPrefix starts every link token, so that secret scanners know one.
const linkPrefix = "ft_"

// linkAD binds sealed tokens to their use.
const linkAD = "froog file link v1"

type fileLink struct {
	Way     string `json:"w"` // get or put
	Sandbox string `json:"s"`
	Path    string `json:"p"`
	KeyID   string `json:"i"`
	Minted  int64  `json:"m"` // unix microseconds
	Expires int64  `json:"e"` // unix seconds
}

type linkRequest struct {
	Path      *string `json:"path"`
	ExpiresIn *int64  `json:"expires_in"`
}

func (s *Server) createDownloadURL(w http.ResponseWriter, r *http.Request) error {
	return s.createFileLink(w, r, "get")
}

func (s *Server) createUploadURL(w http.ResponseWriter, r *http.Request) error {
	return s.createFileLink(w, r, "put")
}

// createFileLink answers {path, expires_in?} with {url, method,
// expires_at}. The sandbox need not run: the path is resolved when the
// link is used.
func (s *Server) createFileLink(w http.ResponseWriter, r *http.Request, way string) error {
	var req linkRequest
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if req.Path == nil {
		return invalid("path is required")
	}
	if err := checkPath("path", *req.Path); err != nil {
		return err
	}
	life := int64(linkDefault / time.Second)
	if req.ExpiresIn != nil {
		if *req.ExpiresIn < linkMin || *req.ExpiresIn > linkMax {
			return invalid("expires_in is from %d to %d seconds", linkMin, linkMax)
		}
		life = *req.ExpiresIn
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	k := keyFrom(r.Context())
	now := s.now()
	exp := now.Add(time.Duration(life) * time.Second).Truncate(time.Second)
	plain, _ := json.Marshal(fileLink{Way: way, Sandbox: sb.ID, Path: *req.Path, KeyID: k.ID, Minted: now.UnixMicro(), Expires: exp.Unix()})
	token := linkPrefix + base64.RawURLEncoding.EncodeToString(s.sealer.seal(string(plain), linkAD))
	method, route := http.MethodGet, "/v1/files/download"
	if way == "put" {
		method, route = http.MethodPut, "/v1/files/upload"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"url": s.baseURL(r) + route + "?token=" + token, "method": method, "expires_at": exp.UTC(),
	})
	return nil
}

// baseURL is where clients reach this API: Options.APIURL, or the
// request's own host.
func (s *Server) baseURL(r *http.Request) string {
	if s.apiURL != "" {
		return s.apiURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// errBadLink answers every link that does not open, whatever the reason:
// a guess learns nothing.
var errBadLink = errorf(http.StatusForbidden, "invalid_link", "this link is not valid")

// openLink checks a link's token and the key behind it, and returns the
// link, its sandbox, and the request carrying the key (for auto-start).
func (s *Server) openLink(r *http.Request, way string) (*fileLink, *store.Sandbox, *http.Request, error) {
	q := r.URL.Query()
	if err := checkQuery(q, "token"); err != nil {
		return nil, nil, nil, err
	}
	token, ok := strings.CutPrefix(q.Get("token"), linkPrefix)
	if !ok || len(token) > maxToken {
		return nil, nil, nil, errBadLink
	}
	sealed, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, nil, nil, errBadLink
	}
	plain, err := s.sealer.open(sealed, linkAD)
	if err != nil {
		return nil, nil, nil, errBadLink
	}
	var l fileLink
	if json.Unmarshal([]byte(plain), &l) != nil || l.Way != way || l.KeyID == "" {
		return nil, nil, nil, errBadLink
	}
	if !s.now().Before(time.Unix(l.Expires, 0)) {
		return nil, nil, nil, errorf(http.StatusForbidden, "link_expired", "this link expired at %s", time.Unix(l.Expires, 0).UTC().Format(time.RFC3339))
	}
	k, err := s.store.APIKeyByID(r.Context(), l.KeyID)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && !k.Vouches(time.UnixMicro(l.Minted), s.now())):
		return nil, nil, nil, errorf(http.StatusForbidden, "link_revoked", "the API key that made this link was revoked, rotated or expired")
	case err != nil:
		return nil, nil, nil, err
	}
	action := "file.read"
	if way == "put" {
		action = "file.write"
	}
	sb, err := s.store.SandboxByID(r.Context(), l.Sandbox)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (sb.AccountID != k.AccountID || !reaches(&k, &sb) || !can(&k, action))) {
		return nil, nil, nil, errorf(http.StatusNotFound, "not_found", "the sandbox of this link is gone or out of the key's reach")
	}
	if err != nil {
		return nil, nil, nil, err
	}
	r = r.WithContext(context.WithValue(r.Context(), keyCtx, &k))
	return &l, &sb, r, nil
}

// linkFiles opens the link's sandbox, running (auto-start as for exec).
func (s *Server) linkFiles(r *http.Request, way string) (*fileLink, *fileConn, *http.Request, error) {
	l, sb, r, err := s.openLink(r, way)
	if err != nil {
		return nil, nil, nil, err
	}
	if s.fileSessions == nil {
		return nil, nil, nil, errorf(http.StatusServiceUnavailable, "unavailable", "this API has no connection to sandboxes")
	}
	sb, err = s.awake(r, sb)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := s.openFiles(r.Context(), sb)
	if err != nil {
		return nil, nil, nil, err
	}
	return l, c, r, nil
}

// GET /v1/files/download?token=T
func (s *Server) linkDownload(w http.ResponseWriter, r *http.Request) error {
	l, c, r, err := s.linkFiles(r, "get")
	if err != nil {
		return err
	}
	defer c.Close()
	return s.sendFile(w, r, c, l.Path)
}

// PUT /v1/files/upload?token=T
func (s *Server) linkUpload(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkLength(r); err != nil {
		return err
	}
	l, c, r, err := s.linkFiles(r, "put")
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := s.receiveFile(r, c, l.Path, nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
