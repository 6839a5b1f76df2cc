package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"froog.tech/froog/names"
	"froog.tech/froog/store"
)

// Limits of the docs.
const (
	defaultTTL     = 3600
	maxTTL         = 30 * 24 * 3600
	maxLifetime    = 30 * 24 * 3600
	maxDeleteAfter = 365 * 24 * 3600
	maxLabels      = 32
	maxListLimit   = 200
)

var (
	sizes    = []string{"small", "default", "large"}
	systems  = []string{"ubuntu-24.04", "ubuntu-26.04", "debian-13", "omarchy"}
	states   = []string{store.StateCreating, store.StateStarting, store.StateRunning, store.StateStopping, store.StateStopped, store.StateError}
	nameRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)
	labelKey = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$`)
)

func checkName(field, name string) error {
	if !nameRE.MatchString(name) {
		return invalid("%s must be 1-40 lowercase letters, digits and dashes, starting with a letter or digit", field)
	}
	if name == "self" {
		return invalid("%s cannot be \"self\"", field)
	}
	return nil
}

func checkLabel(k, v string) error {
	if !labelKey.MatchString(k) {
		return invalid("label key %q must be 1-63 letters, digits, '.', '_', '-' or '/', starting with a letter or digit", k)
	}
	if len(v) > 255 || strings.ContainsAny(v, "\r\n") {
		return invalid("label %q: values are up to 255 characters on one line", k)
	}
	return nil
}

func checkSecs(field string, v *int64, max int64) error {
	if v != nil && (*v < 0 || *v > max) {
		return invalid("%s must be from 0 to %d", field, max)
	}
	return nil
}

// sandboxView is a sandbox as the API shows it.
type sandboxView struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	State           string            `json:"state"`
	DesiredState    string            `json:"desired_state"`
	Error           string            `json:"error,omitempty"`
	Size            string            `json:"size"`
	OS              string            `json:"os"`
	Labels          map[string]string `json:"labels"`
	AutoStart       bool              `json:"auto_start"`
	TTLSecs         int64             `json:"ttl_secs"`
	AutoStopAt      *time.Time        `json:"auto_stop_at"`
	MaxLifetimeSecs int64             `json:"max_lifetime_secs"`
	StopAt          *time.Time        `json:"stop_at"`
	DeleteAfterSecs int64             `json:"delete_after_secs"`
	DeleteAt        *time.Time        `json:"delete_at"`
	StopID          string            `json:"stop_id,omitempty"`
	CreatedAt       time.Time         `json:"created_at"`
	UpdatedAt       time.Time         `json:"updated_at"`
	StartedAt       *time.Time        `json:"started_at"`
	StoppedAt       *time.Time        `json:"stopped_at"`
	// WarmUntil: a stopped sandbox resumes warm until then.
	WarmUntil *time.Time `json:"warm_until"`
	// EnvNames are the names of its own variables; values are never shown.
	EnvNames    []string `json:"env_names"`
	Environment bool     `json:"environment"`
	Snapshots   bool     `json:"snapshots"`
	// RestoreFrom is the snapshot a restore under way rolls it back to.
	RestoreFrom string `json:"restore_from,omitempty"`
	// SetupStatus is always none here: setup scripts, repos and the
	// account's environment live in froog's control plane.
	SetupStatus string          `json:"setup_status"`
	Repo        json.RawMessage `json:"repo"`
}

func viewSandbox(sb *store.Sandbox) sandboxView {
	v := sandboxView{
		ID: sb.ID, Name: sb.Name, State: sb.State, DesiredState: sb.DesiredState, Error: sb.Error,
		Size: sb.Size, OS: sb.OS, Labels: sb.Labels, AutoStart: sb.AutoStart, TTLSecs: sb.TTLSecs,
		MaxLifetimeSecs: sb.MaxLifetimeSecs, DeleteAfterSecs: sb.DeleteAfterSecs, StopID: sb.PendingStopID,
		CreatedAt: sb.CreatedAt, UpdatedAt: sb.UpdatedAt, StartedAt: sb.StartedAt, StoppedAt: sb.StoppedAt,
		EnvNames: envView(sb), Environment: !sb.NoEnvironment, Snapshots: !sb.NoSnapshots,
		SetupStatus: "none", Repo: json.RawMessage("null"), RestoreFrom: sb.RestoreFrom,
	}
	if sb.State == store.StateStopped {
		v.WarmUntil = sb.WarmUntil
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	running := sb.State == store.StateRunning || sb.State == store.StateStarting
	if running && sb.TTLSecs > 0 {
		v.AutoStopAt = sb.AutoStopAt
	}
	if running && sb.MaxLifetimeSecs > 0 && sb.StartedAt != nil {
		t := sb.StartedAt.Add(time.Duration(sb.MaxLifetimeSecs) * time.Second)
		v.StopAt = &t
	}
	if sb.State == store.StateStopped && sb.DeleteAfterSecs > 0 && sb.StoppedAt != nil {
		t := sb.StoppedAt.Add(time.Duration(sb.DeleteAfterSecs) * time.Second)
		v.DeleteAt = &t
	}
	return v
}

// sandboxFor finds the sandbox named in the path and checks that the key
// reaches it.
func (s *Server) sandboxFor(r *http.Request) (*store.Sandbox, error) {
	name := r.PathValue("name")
	if err := checkName("the sandbox name", name); err != nil {
		return nil, err
	}
	k := keyFrom(r.Context())
	sb, err := s.store.Sandbox(r.Context(), k.AccountID, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(http.StatusNotFound, "not_found", "no sandbox named %q", name)
	}
	if err != nil {
		return nil, err
	}
	if !reaches(k, &sb) {
		return nil, errorf(http.StatusForbidden, "api_key_sandbox_forbidden", "this API key cannot reach sandbox %q", name)
	}
	return &sb, nil
}

// unsupported are create fields of the docs that this deployment does not
// offer: asking for one is an error, never silently ignored.
type unsupported struct {
	Setup      json.RawMessage `json:"setup"`
	Monitoring json.RawMessage `json:"monitoring"`
	Files      json.RawMessage `json:"files"`
	Repo       json.RawMessage `json:"repo"`
}

func (u *unsupported) check() error {
	for name, v := range map[string]json.RawMessage{"setup": u.Setup,
		"monitoring": u.Monitoring, "files": u.Files, "repo": u.Repo} {
		if v != nil {
			return badRequest("unsupported_field", "%s is not supported by this froog deployment", name)
		}
	}
	return nil
}

type createRequest struct {
	Name            *string           `json:"name"`
	Size            *string           `json:"size"`
	OS              *string           `json:"os"`
	TTLSecs         *int64            `json:"ttl_secs"`
	Labels          map[string]string `json:"labels"`
	AutoStart       *bool             `json:"auto_start"`
	MaxLifetimeSecs *int64            `json:"max_lifetime_secs"`
	DeleteAfterSecs *int64            `json:"delete_after_secs"`
	Env             map[string]string `json:"env"`
	Environment     json.RawMessage   `json:"environment"`
	Snapshots       json.RawMessage   `json:"snapshots"`
	// From is a saved snapshot (its name or id) the sandbox starts from.
	From *string `json:"from"`
	// Count N makes N sandboxes, NAME-1 … NAME-N (at most 100), all or
	// none.
	Count *int `json:"count"`
	unsupported
}

// sandbox makes the sandbox the request asks for; the caller seals its
// env (req.Env) once it has an id.
func (req *createRequest) sandbox(k *store.APIKey, now time.Time) (store.Sandbox, error) {
	if err := req.unsupported.check(); err != nil {
		return store.Sandbox{}, err
	}
	sb := store.Sandbox{
		ID: store.NewID("sbx"), AccountID: k.AccountID, Size: "default", OS: "ubuntu-24.04", TTLSecs: defaultTTL,
		DesiredState: store.StateRunning, State: store.StateCreating, Labels: map[string]string{},
		CreatedByKey: k.ID, CreatedAt: now, UpdatedAt: now,
	}
	noEnv, _, err := environment(req.Environment)
	if err != nil {
		return sb, err
	}
	if sb.NoSnapshots, _, err = snapshots(req.Snapshots); err != nil {
		return sb, err
	}
	sb.NoEnvironment = noEnv
	if req.Name != nil {
		if err := checkName("name", *req.Name); err != nil {
			return sb, err
		}
		sb.Name = *req.Name
	} else {
		sb.Name = "sandbox-" + names.RandomLabel(6)
	}
	if req.Size != nil {
		if !slices.Contains(sizes, *req.Size) {
			return sb, invalid("size must be one of %s", strings.Join(sizes, ", "))
		}
		sb.Size = *req.Size
	}
	if req.OS != nil {
		if !slices.Contains(systems, *req.OS) {
			return sb, invalid("os must be one of %s", strings.Join(systems, ", "))
		}
		sb.OS = *req.OS
	}
	for _, c := range []error{checkSecs("ttl_secs", req.TTLSecs, maxTTL), checkSecs("max_lifetime_secs", req.MaxLifetimeSecs, maxLifetime),
		checkSecs("delete_after_secs", req.DeleteAfterSecs, maxDeleteAfter), checkEnv(req.Env)} {
		if c != nil {
			return sb, c
		}
	}
	if req.TTLSecs != nil {
		sb.TTLSecs = *req.TTLSecs
	}
	if req.MaxLifetimeSecs != nil {
		sb.MaxLifetimeSecs = *req.MaxLifetimeSecs
	}
	if req.DeleteAfterSecs != nil {
		sb.DeleteAfterSecs = *req.DeleteAfterSecs
	}
	if req.AutoStart != nil {
		sb.AutoStart = *req.AutoStart
	}
	if len(req.Labels) > maxLabels {
		return sb, invalid("a sandbox has at most %d labels", maxLabels)
	}
	for lk, lv := range req.Labels {
		if err := checkLabel(lk, lv); err != nil {
			return sb, err
		}
		sb.Labels[lk] = lv
	}
	// A label-limited key's sandboxes carry its labels.
	for lk, lv := range k.Labels {
		if v, ok := sb.Labels[lk]; ok && v != lv {
			return sb, errorf(http.StatusForbidden, "api_key_label_forbidden", "this API key only makes sandboxes with %s=%s", lk, lv)
		}
		sb.Labels[lk] = lv
	}
	if len(sb.Labels) > maxLabels {
		return sb, invalid("a sandbox has at most %d labels", maxLabels)
	}
	return sb, nil
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	var req createRequest
	body, err := readCreate(r, &req, true)
	if err != nil {
		return err
	}
	sb, err := req.sandbox(k, s.now())
	if err != nil {
		return err
	}
	copies, err := forkNames(sb.Name, req.Count)
	if err != nil {
		return err
	}
	if err := s.fromSaved(r, &req, &sb); err != nil {
		return err
	}
	detail := map[string]string{"size": sb.Size, "os": sb.OS}
	if sb.ForkSnapshot != "" {
		detail["from"] = *req.From
	}
	if len(sb.Labels) > 0 {
		detail["labels"] = labelString(sb.Labels)
	}
	if len(req.Env) > 0 {
		detail["env"] = strings.Join(slices.Sorted(maps.Keys(req.Env)), ",")
	}
	if sb.NoEnvironment {
		detail["environment"] = "false"
	}
	if sb.NoSnapshots {
		detail["snapshots"] = "false"
	}
	if req.Count != nil {
		return s.createCopies(w, r, "sandbox.create", body, sb, req.Env, copies, detail)
	}
	s.sealEnv(&sb, req.Env)
	return s.create(w, r, body, sb, s.audit(r, "sandbox.create", sb.Name, detail))
}

// readCreate reads a request that creates sandboxes into v, and checks
// its Idempotency-Key; it returns the body, which the key is bound to.
func readCreate(r *http.Request, v any, emptyOK bool) ([]byte, error) {
	body, err := readBodyMax(r, maxBody)
	if err != nil {
		return nil, err
	}
	if k, ok := r.Header["Idempotency-Key"]; ok && (len(k) != 1 || k[0] == "" || len(k[0]) > 255) {
		return nil, badRequest("invalid_header", "Idempotency-Key must be 1-255 characters")
	}
	return body, decodeJSON(body, v, emptyOK)
}

// create stores a new sandbox (a create or a fork) and answers 202 with
// it.
func (s *Server) create(w http.ResponseWriter, r *http.Request, request []byte, sb store.Sandbox, ev *store.AuditEvent) error {
	return s.idempotent(w, r, request, sb.CreatedAt, func() ([]byte, error) {
		created, err := s.store.CreateSandbox(r.Context(), sb, ev)
		if errors.Is(err, store.ErrConflict) {
			err = errorf(http.StatusConflict, "conflict", "a sandbox named %q exists", sb.Name)
		}
		if err != nil {
			return nil, err
		}
		return json.Marshal(viewSandbox(&created))
	})
}

// idempotent answers 202 with what do makes. With an Idempotency-Key, a
// retry of the same request (request says what makes it the same) gets
// the same answer and do does not run again; an error is not kept (a
// retry runs again).
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, request []byte, at time.Time, do func() ([]byte, error)) error {
	k := keyFrom(r.Context())
	idemKey := r.Header.Get("Idempotency-Key")
	if idemKey != "" {
		sum := sha256.Sum256(request)
		prev, err := s.store.BeginIdempotent(r.Context(), store.Idempotency{AccountID: k.AccountID, Key: idemKey, KeyID: k.ID, RequestHash: hex.EncodeToString(sum[:]), CreatedAt: at})
		if err != nil {
			return err
		}
		if prev != nil {
			if err := s.mayReplay(r.Context(), k, prev); err != nil {
				return err
			}
			w.Header().Set("Idempotent-Replayed", "true")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(prev.Status)
			w.Write(prev.Body)
			return nil
		}
	}
	out, err := do()
	if err != nil {
		if idemKey != "" {
			s.store.AbandonIdempotent(r.Context(), k.AccountID, idemKey)
		}
		return err
	}
	if idemKey != "" {
		if err := s.store.FinishIdempotent(r.Context(), k.AccountID, idemKey, http.StatusAccepted, out); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	w.Write(out)
	return nil
}

type forkRequest struct {
	Name    *string           `json:"name"`
	Size    *string           `json:"size"`
	TTLSecs *int64            `json:"ttl_secs"`
	Env     map[string]string `json:"env"`
	// Count N makes N copies, NAME-1 … NAME-N (at most 100).
	Count *int `json:"count"`
	// Snapshot (an id, a label or latest) forks that snapshot of the
	// source instead of its current disk.
	Snapshot *string `json:"snapshot"`
	// Snapshots false: copies a stop erases (the source's setting when
	// absent).
	Snapshots json.RawMessage `json:"snapshots"`
	unsupported
}

// forkSandbox makes a new sandbox that starts from the source's disk, with
// the source's settings (size and auto-stop timer unless given; env on
// top of the source's own).
func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	var req forkRequest
	body, err := readCreate(r, &req, false)
	if err != nil {
		return err
	}
	if err := req.unsupported.check(); err != nil {
		return err
	}
	if req.Name == nil {
		return invalid("name is required: the fork's name")
	}
	if err := checkName("name", *req.Name); err != nil {
		return err
	}
	if req.Size != nil && !slices.Contains(sizes, *req.Size) {
		return invalid("size must be one of %s", strings.Join(sizes, ", "))
	}
	if err := errors.Join(checkSecs("ttl_secs", req.TTLSecs, maxTTL), checkEnv(req.Env)); err != nil {
		return err
	}
	copies, err := forkNames(*req.Name, req.Count)
	if err != nil {
		return err
	}
	src, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	// Any fork copies the disk, from its current state too.
	if err := snapshotsOff(src); err != nil {
		return err
	}
	snap, err := s.forkSnapshot(r.Context(), src, req.Snapshot)
	if err != nil {
		return err
	}
	noSnapshots, setSnapshots, err := snapshots(req.Snapshots)
	if err != nil {
		return err
	}
	now := s.now()
	sb := store.Sandbox{ID: store.NewID("sbx"), AccountID: k.AccountID, Name: *req.Name, Size: src.Size, OS: src.OS, ForkOf: src.ID,
		DesiredState: store.StateRunning, State: store.StateCreating, AutoStart: src.AutoStart, TTLSecs: src.TTLSecs,
		MaxLifetimeSecs: src.MaxLifetimeSecs, DeleteAfterSecs: src.DeleteAfterSecs, Labels: maps.Clone(src.Labels),
		NoEnvironment: src.NoEnvironment, NoSnapshots: src.NoSnapshots, CreatedByKey: k.ID, CreatedAt: now, UpdatedAt: now}
	if setSnapshots {
		sb.NoSnapshots = noSnapshots
	}
	if sb.Labels == nil {
		sb.Labels = map[string]string{}
	}
	if req.Size != nil {
		sb.Size = *req.Size
	}
	if req.TTLSecs != nil {
		sb.TTLSecs = *req.TTLSecs
	}
	// The fork's variables are the source's, with the request's on top.
	env, err := s.openEnv(src)
	if err != nil {
		return err
	}
	maps.Copy(env, req.Env)
	if err := checkEnv(env); err != nil {
		return err
	}
	// A fork of another sandbox with the same body is another request.
	request := append([]byte("fork "+src.ID+"\n"), body...)
	detail := map[string]string{"from": src.Name, "size": sb.Size}
	if snap != nil {
		sb.ForkSnapshot, detail["snapshot"] = snap.ID, snap.ID
	}
	if req.Count == nil {
		s.sealEnv(&sb, env)
		return s.create(w, r, request, sb, s.audit(r, "sandbox.fork", sb.Name, detail))
	}
	return s.createCopies(w, r, "sandbox.fork", request, sb, env, copies, detail)
}

func labelString(l map[string]string) string {
	keys := slices.Sorted(maps.Keys(l))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ",")
}

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
			ev.Detail["environment"] = "false"
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
