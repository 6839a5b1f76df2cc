package api

import (
	"net/http"
	"strconv"
	"time"
)

type auditView struct {
	ID         string            `json:"id"`
	At         time.Time         `json:"at"`
	Action     string            `json:"action"`
	Target     string            `json:"target"`
	Actor      string            `json:"actor"`
	ActorLabel string            `json:"actor_label"`
	IP         string            `json:"ip"`
	RequestID  string            `json:"request_id"`
	Detail     map[string]string `json:"detail"`
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	q := r.URL.Query()
	if err := checkQuery(q, "limit", "cursor"); err != nil {
		return err
	}
	limit, err := queryLimit(q, 50)
	if err != nil {
		return err
	}
	var before int64
	if c := q.Get("cursor"); c != "" {
		if before, err = strconv.ParseInt(c, 10, 64); err != nil || before < 1 {
			return badRequest("invalid_query", "cursor is not one this API gave out")
		}
	}
	out := struct {
		Events     []auditView `json:"events"`
		NextCursor *string     `json:"next_cursor"`
	}{Events: []auditView{}}
	// A key limited to some sandboxes, by name or by label, gets an empty
	// list (the docs say so). Events name their sandbox by name, which can
	// be reused and relabelled: filtering them by the key's reach would
	// show a sandbox's history from before the key could reach it.
	if limited(k) {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	events, err := s.store.Audit(r.Context(), k.AccountID, before, limit)
	if err != nil {
		return err
	}
	for _, e := range events {
		d := e.Detail
		if d == nil {
			d = map[string]string{}
		}
		out.Events = append(out.Events, auditView{ID: strconv.FormatInt(e.ID, 10), At: e.At, Action: e.Action, Target: e.Target,
			Actor: e.Actor, ActorLabel: e.ActorLabel, IP: e.IP, RequestID: e.RequestID, Detail: d})
	}
	if len(events) == limit {
		c := out.Events[len(out.Events)-1].ID
		out.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
