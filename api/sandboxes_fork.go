package api

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"

	"froog.tech/froog/store"
)

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
	// Monitoring: the source's setting when absent.
	Monitoring json.RawMessage `json:"monitoring"`
	unsupported
}

// forkSandbox makes a new sandbox that starts from the source's disk, with
// the source's settings (size and auto-stop timer unless given; env on
// top of the source's own).
func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	var req forkRequest
	body, err := readCreate(r, maxBody, &req, false)
	if err != nil {
		return err
	}
	if err := forkRefuses(&req.unsupported); err != nil {
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
	if snap == nil {
		if err := diskExpired(src); err != nil {
			return err
		}
	}
	noSnapshots, setSnapshots, err := snapshots(req.Snapshots)
	if err != nil {
		return err
	}
	noMonitoring, setMonitoring, err := offSetting("monitoring", req.Monitoring)
	if err != nil {
		return err
	}
	now := s.now()
	sb := store.Sandbox{ID: store.NewID("sbx"), AccountID: k.AccountID, Name: *req.Name, Size: src.Size, OS: src.OS, ForkOf: src.ID,
		DesiredState: store.StateRunning, State: store.StateCreating, AutoStart: src.AutoStart, TTLSecs: src.TTLSecs,
		MaxLifetimeSecs: src.MaxLifetimeSecs, DeleteAfterSecs: src.DeleteAfterSecs, Labels: maps.Clone(src.Labels),
		NoEnvironment: src.NoEnvironment, NoSnapshots: src.NoSnapshots, NoMonitoring: src.NoMonitoring, Ports: slices.Clone(src.Ports),
		OwnFiles:     slices.Clone(src.OwnFiles),
		CreatedByKey: k.ID, CreatedAt: now, UpdatedAt: now}
	if setSnapshots {
		sb.NoSnapshots = noSnapshots
	}
	if setMonitoring {
		sb.NoMonitoring = noMonitoring
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
	return s.createCopies(w, r, "sandbox.fork", request, sb, func(sb *store.Sandbox) { s.sealEnv(sb, env) }, copies, detail)
}
