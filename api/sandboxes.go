package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"regexp"
	"slices"
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
	ID           string `json:"id"`
	Name         string `json:"name"`
	State        string `json:"state"`
	DesiredState string `json:"desired_state"`
	Error        string `json:"error,omitempty"`
	// StartStage: how far a start has got (or the stage a failed one
	// stopped in), as its host's driver says.
	StartStage      string            `json:"start_stage,omitempty"`
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
	// DiskExpiresAt: a stopped sandbox's disk is deleted then (store.DiskKept);
	// DiskExpiredAt: it was, and only a restore from a saved snapshot
	// starts it again.
	DiskExpiresAt *time.Time `json:"disk_expires_at"`
	DiskExpiredAt *time.Time `json:"disk_expired_at,omitempty"`
	StopID        string     `json:"stop_id,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	StartedAt     *time.Time `json:"started_at"`
	StoppedAt     *time.Time `json:"stopped_at"`
	// WarmUntil: a stopped sandbox resumes warm until then.
	WarmUntil *time.Time `json:"warm_until"`
	// LastActiveAt is the latest activity recorded (POST …/touch); it
	// moves no deadline.
	LastActiveAt *time.Time `json:"last_active_at"`
	// EnvNames are the names of its own variables; values are never shown.
	EnvNames    []string `json:"env_names"`
	Environment bool     `json:"environment"`
	Snapshots   bool     `json:"snapshots"`
	Monitoring  bool     `json:"monitoring"`
	// RestoreFrom is the snapshot a restore under way rolls it back to.
	RestoreFrom string `json:"restore_from,omitempty"`
	// SetupStatus is how the last start's setup went (hostctl writes the
	// account's secret files and runs its repos' clones and setup script
	// as a job): none when there was nothing to do, running, done or
	// failed, with SetupError saying why.
	SetupStatus string `json:"setup_status"`
	SetupError  string `json:"setup_error,omitempty"`
	// Repo is the repo of its own its create asked for (cloned at the
	// first boot), null without one.
	Repo *store.SandboxRepo `json:"repo"`
	// IPv6 is its own public IPv6 address while it runs (ports.go).
	IPv6 *string `json:"ipv6"`
}

func viewSandbox(sb *store.Sandbox) sandboxView {
	v := sandboxView{
		ID: sb.ID, Name: sb.Name, State: sb.State, DesiredState: sb.DesiredState, Error: sb.Error, StartStage: sb.StartStage,
		Size: sb.Size, OS: sb.OS, Labels: sb.Labels, AutoStart: sb.AutoStart, TTLSecs: sb.TTLSecs,
		MaxLifetimeSecs: sb.MaxLifetimeSecs, DeleteAfterSecs: sb.DeleteAfterSecs, StopID: sb.PendingStopID,
		CreatedAt: sb.CreatedAt, UpdatedAt: sb.UpdatedAt, StartedAt: sb.StartedAt, StoppedAt: sb.StoppedAt, LastActiveAt: sb.LastActiveAt,
		EnvNames: envView(sb), Environment: !sb.NoEnvironment, Snapshots: !sb.NoSnapshots, Monitoring: !sb.NoMonitoring,
		SetupStatus: "none", Repo: sb.Repo, RestoreFrom: sb.RestoreFrom,
	}
	if sb.SetupStatus != "" {
		v.SetupStatus, v.SetupError = sb.SetupStatus, sb.SetupError
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
	v.DiskExpiresAt, v.DiskExpiredAt = store.DiskExpiresAt(sb), sb.DiskExpiredAt
	v.IPv6 = ipv6View(sb)
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
	Setup json.RawMessage `json:"setup"`
	Files json.RawMessage `json:"files"`
	Repo  json.RawMessage `json:"repo"`
}

func (u *unsupported) check() error {
	for name, v := range map[string]json.RawMessage{"setup": u.Setup, "files": u.Files, "repo": u.Repo} {
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
	// Monitoring false keeps no command history of it.
	Monitoring json.RawMessage `json:"monitoring"`
	// From is a saved snapshot (its name or id) the sandbox starts from.
	From *string `json:"from"`
	// Count N makes N sandboxes, NAME-1 … NAME-N (at most 100), all or
	// none.
	Count *int `json:"count"`
	// Files, Repo and Setup are for the first boot alone
	// (sandboxes_firstboot.go).
	Files json.RawMessage `json:"files"`
	Repo  *createRepo     `json:"repo"`
	Setup *string         `json:"setup"`
}

// sandbox makes the sandbox the request asks for; the caller seals its
// env (req.Env) once it has an id.
func (req *createRequest) sandbox(k *store.APIKey, now time.Time) (store.Sandbox, error) {
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
	if sb.NoMonitoring, _, err = offSetting("monitoring", req.Monitoring); err != nil {
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
	body, err := readCreate(r, maxCreateBody, &req, true)
	if err != nil {
		return err
	}
	sb, err := req.sandbox(k, s.now())
	if err != nil {
		return err
	}
	fb, err := req.firstBoot()
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
	fb.describe(detail)
	own := func(sb *store.Sandbox) {
		s.sealEnv(sb, req.Env)
		s.sealFirstBoot(sb, fb)
	}
	if req.Count != nil {
		return s.createCopies(w, r, "sandbox.create", body, sb, own, copies, detail)
	}
	own(&sb)
	return s.create(w, r, body, sb, s.audit(r, "sandbox.create", sb.Name, detail))
}

// readCreate reads a request that creates sandboxes (of at most limit
// bytes) into v, and checks
// its Idempotency-Key; it returns the body, which the key is bound to.
func readCreate(r *http.Request, limit int, v any, emptyOK bool) ([]byte, error) {
	body, err := readBodyMax(r, limit)
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

func labelString(l map[string]string) string {
	keys := slices.Sorted(maps.Keys(l))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ",")
}
