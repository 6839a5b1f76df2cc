package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"froog.tech/froog/store"
)

type patchRequest struct {
	Name            *string            `json:"name"`
	TTLSecs         *int64             `json:"ttl_secs"`
	Labels          map[string]*string `json:"labels"`
	MaxLifetimeSecs *int64             `json:"max_lifetime_secs"`
	DeleteAfterSecs *int64             `json:"delete_after_secs"`
	AutoStart       *bool              `json:"auto_start"`
	// Env sets its own variables (a value) or removes them (null); those
	// not named stay.
	Env map[string]*string `json:"env"`
}

func (req *patchRequest) check() error {
	if req.Name != nil {
		if err := checkName("name", *req.Name); err != nil {
			return err
		}
	}
	for _, c := range []error{checkSecs("ttl_secs", req.TTLSecs, maxTTL), checkSecs("max_lifetime_secs", req.MaxLifetimeSecs, maxLifetime),
		checkSecs("delete_after_secs", req.DeleteAfterSecs, maxDeleteAfter)} {
		if c != nil {
			return c
		}
	}
	for lk, lv := range req.Labels {
		v := ""
		if lv != nil {
			v = *lv
		}
		if err := checkLabel(lk, v); err != nil {
			return err
		}
	}
	env := map[string]string{}
	for k, v := range req.Env {
		if v != nil {
			env[k] = *v
		} else if !envKey.MatchString(k) {
			return invalid("env: %q is not a variable name", k)
		}
	}
	return checkEnv(env)
}

func (s *Server) patchSandbox(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	var req patchRequest
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	for lk, lv := range req.Labels {
		if kv, ok := k.Labels[lk]; ok && (lv == nil || *lv != kv) {
			return errorf(http.StatusForbidden, "api_key_label_forbidden", "this API key cannot change label %q", lk)
		}
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	now := s.now()
	detail := map[string]string{}
	up, err := s.store.UpdateSandbox(r.Context(), sb.ID, func(sb *store.Sandbox, ev *store.AuditEvent) error {
		if req.Name != nil && *req.Name != sb.Name {
			detail["name"] = *req.Name
			sb.Name = *req.Name
		}
		if req.TTLSecs != nil {
			detail["ttl_secs"] = fmt.Sprint(*req.TTLSecs)
			sb.TTLSecs = *req.TTLSecs
			// A running sandbox then stops that long from now.
			sb.AutoStopAt = nil
			if sb.TTLSecs > 0 && sb.DesiredState == store.StateRunning {
				t := now.Add(time.Duration(sb.TTLSecs) * time.Second)
				sb.AutoStopAt = &t
			}
		}
		if req.MaxLifetimeSecs != nil {
			detail["max_lifetime_secs"] = fmt.Sprint(*req.MaxLifetimeSecs)
			sb.MaxLifetimeSecs = *req.MaxLifetimeSecs
		}
		if req.DeleteAfterSecs != nil {
			detail["delete_after_secs"] = fmt.Sprint(*req.DeleteAfterSecs)
			sb.DeleteAfterSecs = *req.DeleteAfterSecs
		}
		if req.AutoStart != nil {
			detail["auto_start"] = fmt.Sprint(*req.AutoStart)
			sb.AutoStart = *req.AutoStart
		}
		if len(req.Labels) > 0 {
			if sb.Labels == nil {
				sb.Labels = map[string]string{}
			}
			for lk, lv := range req.Labels {
				if lv == nil {
					delete(sb.Labels, lk)
				} else {
					sb.Labels[lk] = *lv
				}
			}
			if len(sb.Labels) > maxLabels {
				return invalid("a sandbox has at most %d labels", maxLabels)
			}
			detail["labels"] = labelString(sb.Labels)
		}
		names, err := s.addEnv(sb, req.Env)
		if err != nil {
			return err
		}
		if names != "" {
			detail["env"] = names // names only: values never reach the audit log
		}
		sb.UpdatedAt = now
		ev.Detail = detail
		return nil
	}, s.audit(r, "sandbox.update", sb.Name, nil))
	if errors.Is(err, store.ErrConflict) {
		err = errorf(http.StatusConflict, "conflict", "a sandbox named %q exists", *req.Name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSandbox(&up))
	return nil
}

// touchSandbox records activity: last_active_at, at the API's clock
// (store.Touch). It is bookkeeping, so it answers at once with the
// sandbox and changes nothing else: the auto-stop deadline stays (PATCH
// ttl_secs moves it), a stopped sandbox is not started (auto-start or
// not), and it writes no audit event (the audit log keeps changes to
// the account, and a touch is a heartbeat a client may send often).
func (s *Server) touchSandbox(w http.ResponseWriter, r *http.Request) error {
	if err := readJSON(r, maxBody, &struct{}{}, true); err != nil {
		return err
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	at := s.now()
	up, err := s.store.UpdateSandbox(r.Context(), sb.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error {
		store.Touch(sb, at)
		return nil
	}, nil)
	if errors.Is(err, store.ErrNotFound) {
		err = errorf(http.StatusNotFound, "not_found", "no sandbox named %q", sb.Name) // deleted since it was read
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSandbox(&up))
	return nil
}

type startRequest struct {
	Size        *string           `json:"size"`
	TTLSecs     *int64            `json:"ttl_secs"`
	Env         map[string]string `json:"env"`
	Environment json.RawMessage   `json:"environment"`
}

func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request) error {
	var req startRequest
	if err := readJSON(r, maxBody, &req, true); err != nil {
		return err
	}
	noEnv, setEnvironment, err := environment(req.Environment)
	if err != nil {
		return err
	}
	if req.Size != nil && !slices.Contains(sizes, *req.Size) {
		return invalid("size must be one of %s", strings.Join(sizes, ", "))
	}
	if err := checkSecs("ttl_secs", req.TTLSecs, maxTTL); err != nil {
		return err
	}
	if err := checkEnv(req.Env); err != nil {
		return err
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	now := s.now()
	up, err := s.store.UpdateSandbox(r.Context(), sb.ID, func(sb *store.Sandbox, ev *store.AuditEvent) error {
		if store.Erasing(sb) {
			return errorf(http.StatusConflict, "conflict", "sandbox %q is being erased: it was made with snapshots off, and a stop erases it", sb.Name)
		}
		if err := diskExpired(sb); err != nil {
			return err
		}
		if req.Size != nil && *req.Size != sb.Size {
			if sb.State != store.StateStopped || sb.DesiredState != store.StateStopped {
				return errorf(http.StatusConflict, "conflict", "the size changes only while the sandbox is stopped")
			}
			sb.Size = *req.Size
			ev.Detail["size"] = sb.Size
		}
		if req.TTLSecs != nil {
			sb.TTLSecs = *req.TTLSecs
			ev.Detail["ttl_secs"] = fmt.Sprint(sb.TTLSecs)
		}
		names, err := s.addEnv(sb, setEnv(req.Env))
		if err != nil {
			return err
		}
		if names != "" {
			ev.Detail["env"] = names
		}
		if setEnvironment {
			sb.NoEnvironment = noEnv
			ev.Detail["environment"] = fmt.Sprint(!noEnv)
		}
		sb.DesiredState, sb.UpdatedAt = store.StateRunning, now
		return nil
	}, s.audit(r, "sandbox.start", sb.Name, map[string]string{}))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, viewSandbox(&up))
	return nil
}

type stopView struct {
	ID          string     `json:"id"`
	StopID      string     `json:"stop_id"`
	Sandbox     string     `json:"sandbox"`
	Status      string     `json:"status"`
	RequestedAt time.Time  `json:"requested_at"`
	EndedAt     *time.Time `json:"ended_at"`
	Error       string     `json:"error,omitempty"`
}

func viewStop(st *store.Stop) stopView {
	return stopView{ID: st.ID, StopID: st.ID, Sandbox: st.Sandbox, Status: st.Status, RequestedAt: st.RequestedAt, EndedAt: st.EndedAt, Error: st.Error}
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) error {
	if err := readJSON(r, maxBody, &struct{}{}, true); err != nil {
		return err
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	st, err := s.store.StopSandbox(r.Context(), sb.ID, s.now(), s.audit(r, "sandbox.stop", sb.Name, nil))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, viewStop(&st))
	return nil
}

func (s *Server) getStop(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	id := r.PathValue("id")
	if !strings.HasPrefix(id, "stop_") || len(id) > 64 {
		return errorf(http.StatusNotFound, "not_found", "no such stop")
	}
	st, err := s.store.Stop(r.Context(), k.AccountID, id)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "not_found", "no such stop")
	}
	if err != nil {
		return err
	}
	sb, err := s.store.SandboxByID(r.Context(), st.SandboxID)
	if errors.Is(err, store.ErrNotFound) {
		// Gone (a stop with snapshots off erases the sandbox): the stop
		// still says how it ended, to the keys that reached the sandbox.
		sb, err = store.Sandbox{Name: st.Sandbox, Labels: st.Labels, CreatedByKey: st.CreatedByKey}, nil
	}
	if err != nil {
		return err
	}
	if !reaches(k, &sb) {
		return errorf(http.StatusForbidden, "api_key_sandbox_forbidden", "this API key cannot reach that sandbox")
	}
	writeJSON(w, http.StatusOK, viewStop(&st))
	return nil
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	if !can(k, "sandbox.delete") && !(can(k, "sandbox.delete-own") && sb.CreatedByKey == k.ID) {
		return errorf(http.StatusForbidden, "api_key_action_forbidden", "this API key cannot sandbox.delete")
	}
	if err := s.store.DeleteSandbox(r.Context(), sb.ID, s.now(), s.audit(r, "sandbox.delete", sb.Name, nil)); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"name": sb.Name, "deleted": true})
	return nil
}
