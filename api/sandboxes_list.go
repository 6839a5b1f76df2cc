package api

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"froog.tech/froog/store"
)

// checkQuery refuses parameters a route does not know.
func checkQuery(q url.Values, known ...string) error {
	for p := range q {
		if !slices.Contains(known, p) {
			return badRequest("invalid_query", "unknown query parameter %q", p)
		}
	}
	return nil
}

func queryLimit(q url.Values, def int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, badRequest("invalid_query", "limit must be from 1 to %d", maxListLimit)
	}
	return n, nil
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	q := r.URL.Query()
	if err := checkQuery(q, "label", "name", "name_prefix", "state", "limit", "cursor"); err != nil {
		return err
	}
	f := store.SandboxFilter{AccountID: k.AccountID, Name: q.Get("name"), NamePrefix: q.Get("name_prefix"), Labels: map[string]string{}}
	limit, err := queryLimit(q, 0)
	if err != nil {
		return err
	}
	f.Limit = limit
	for _, l := range q["label"] {
		lk, lv, hasValue := strings.Cut(l, "=")
		if err := checkLabel(lk, lv); err != nil {
			return badRequest("invalid_query", "label must be KEY=VALUE or KEY: %s", err.(*Error).Message)
		}
		if !hasValue {
			f.LabelKeys = append(f.LabelKeys, lk)
			continue
		}
		if old, ok := f.Labels[lk]; ok && old != lv {
			return writeList(w, nil)
		}
		f.Labels[lk] = lv
	}
	if st := q.Get("state"); st != "" {
		for _, one := range strings.Split(st, ",") {
			if !slices.Contains(states, one) {
				return badRequest("invalid_query", "state must be among %s", strings.Join(states, ", "))
			}
			f.States = append(f.States, one)
		}
	}
	if c := q.Get("cursor"); c != "" {
		ts, id, ok := strings.Cut(c, "_")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || err != nil || id == "" {
			return badRequest("invalid_query", "cursor is not one this API gave out")
		}
		f.AfterTime, f.AfterID = t, id
	}
	// A key reaches only its sandboxes, and only those with its labels.
	if scoped(k) {
		f.Names, f.OrCreatedBy = slices.Clone(k.Sandboxes), k.ID
	}
	for lk, lv := range k.Labels {
		if old, ok := f.Labels[lk]; ok && old != lv {
			return writeList(w, nil)
		}
		f.Labels[lk] = lv
	}
	list, err := s.store.ListSandboxes(r.Context(), f)
	if err != nil {
		return err
	}
	if limit > 0 && len(list) == limit {
		last := list[len(list)-1]
		w.Header().Set("X-Next-Cursor", last.CreatedAt.UTC().Format(time.RFC3339Nano)+"_"+last.ID)
	}
	return writeList(w, list)
}

func writeList(w http.ResponseWriter, list []store.Sandbox) error {
	out := make([]sandboxView, len(list))
	for i := range list {
		out[i] = viewSandbox(&list[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSandbox(sb))
	return nil
}
