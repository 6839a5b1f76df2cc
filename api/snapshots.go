package api

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"froog.tech/froog/store"
)

// Snapshots: the API writes intent (a saved snapshot in status creating,
// a sandbox's restore_from) and hostctl copies the disks; automatic
// snapshots are hostctl's alone. See store.Snapshot.

// snapshotLabel is a saved snapshot's name: what the CLI's NAME@LABEL and
// the API's {snap} take. "latest" and ids (snap_…) are not labels.
var snapshotLabel = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func checkLabelName(field, label string) error {
	if !snapshotLabel.MatchString(label) || label == "latest" || strings.HasPrefix(label, "snap_") {
		return invalid("%s must be 1-63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit, and neither latest nor an id", field)
	}
	return nil
}

type snapshotView struct {
	ID      string `json:"id"`
	Name    string `json:"name,omitempty"` // a saved one's label
	Label   string `json:"label,omitempty"`
	Saved   bool   `json:"saved"`
	Reason  string `json:"reason,omitempty"` // an automatic one's: hourly, stop or restore
	Sandbox string `json:"sandbox"`
	Source  string `json:"source"`
	// SourceDeleted: the sandbox it was taken of is gone (saved ones stay).
	SourceDeleted bool       `json:"source_deleted"`
	OS            string     `json:"os"`
	Size          string     `json:"size"`
	SizeGB        float64    `json:"size_gb"`
	Status        string     `json:"status"`
	Error         string     `json:"error,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	ReadyAt       *time.Time `json:"ready_at"`
}

// viewSnapshots shows list; a key limited to some sandboxes sees only
// the snapshots of sandboxes it reaches.
func (s *Server) viewSnapshots(ctx context.Context, k *store.APIKey, list []store.Snapshot) ([]snapshotView, error) {
	out := []snapshotView{}
	sandboxes := map[string]*store.Sandbox{}
	for _, sn := range list {
		sb, ok := sandboxes[sn.SandboxID]
		if !ok {
			got, err := s.store.SandboxByID(ctx, sn.SandboxID)
			switch {
			case err == nil && got.DeletedAt == nil:
				sb = &got
			case err != nil && !errors.Is(err, store.ErrNotFound):
				return nil, err
			}
			sandboxes[sn.SandboxID] = sb
		}
		if limited(k) && (sb == nil || !reaches(k, sb)) {
			continue
		}
		out = append(out, viewSnapshot(&sn, sb))
	}
	return out, nil
}

func viewSnapshot(sn *store.Snapshot, sb *store.Sandbox) snapshotView {
	v := snapshotView{ID: sn.ID, Label: sn.Label, Saved: sn.Saved, Reason: sn.Reason, Sandbox: sn.Sandbox, Source: sn.Sandbox,
		SourceDeleted: sb == nil, OS: sn.OS, Size: sn.Size, SizeGB: float64(sn.Bytes) / (1 << 30), Status: sn.Status, Error: sn.Error,
		CreatedAt: sn.CreatedAt, ReadyAt: sn.ReadyAt}
	if sb != nil {
		v.Sandbox, v.Source = sb.Name, sb.Name // renamed since
	}
	if sn.Saved {
		v.Name = sn.Label
	}
	return v
}

// snapshotsOff is the docs' answer for a sandbox made with snapshots: false.
func snapshotsOff(sb *store.Sandbox) error {
	if sb.NoSnapshots {
		return errorf(http.StatusConflict, "snapshots_off", "sandbox %q was made with snapshots off: no snapshots, restores or forks of it", sb.Name)
	}
	return nil
}

// diskExpired refuses what needs sb's disk once it expired
// (store.DiskKept): a start, or a fork of its current state.
func diskExpired(sb *store.Sandbox) error {
	if sb.DiskExpiredAt != nil {
		return errorf(http.StatusConflict, "snapshot_data_expired", "sandbox %q: %s", sb.Name, store.DiskExpiredMessage)
	}
	return nil
}

// findSnapshot finds one of sb's snapshots by id, label or latest (the
// newest available one).
func (s *Server) findSnapshot(ctx context.Context, sb *store.Sandbox, ref string) (store.Snapshot, error) {
	notFound := errorf(http.StatusNotFound, "not_found", "sandbox %q has no snapshot %q", sb.Name, ref)
	if len(ref) > 64 || ref == "" {
		return store.Snapshot{}, notFound
	}
	if strings.HasPrefix(ref, "snap_") {
		sn, err := s.store.Snapshot(ctx, sb.AccountID, ref)
		if errors.Is(err, store.ErrNotFound) || err == nil && (sn.SandboxID != sb.ID || sn.DeletedAt != nil) {
			return store.Snapshot{}, notFound
		}
		return sn, err
	}
	f := store.SnapshotFilter{AccountID: sb.AccountID, SandboxID: sb.ID, Label: ref}
	if ref == "latest" {
		f.Label, f.Status = "", store.SnapshotAvailable
	}
	list, err := s.store.ListSnapshots(ctx, f)
	if err != nil {
		return store.Snapshot{}, err
	}
	for _, sn := range list { // newest first: an available one wins
		if sn.Status == store.SnapshotAvailable {
			return sn, nil
		}
	}
	if len(list) == 0 {
		return store.Snapshot{}, notFound
	}
	return list[0], nil
}

// available is sn, or a 409 saying why it cannot be used yet.
func available(sn *store.Snapshot) error {
	if sn.Status != store.SnapshotAvailable {
		return errorf(http.StatusConflict, "snapshot_not_available", "snapshot %s is %s, not available", sn.ID, sn.Status)
	}
	return nil
}

func (s *Server) listSandboxSnapshots(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	list, err := s.store.ListSnapshots(r.Context(), store.SnapshotFilter{AccountID: sb.AccountID, SandboxID: sb.ID})
	if err != nil {
		return err
	}
	out := make([]snapshotView, len(list))
	for i := range list {
		out[i] = viewSnapshot(&list[i], sb)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// saveSnapshot asks for a saved snapshot of the sandbox's disk now;
// hostctl takes it (status creating, then available).
func (s *Server) saveSnapshot(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Label *string `json:"label"`
	}
	if err := readJSON(r, maxBody, &req, true); err != nil {
		return err
	}
	label := ""
	if req.Label != nil {
		if err := checkLabelName("label", *req.Label); err != nil {
			return err
		}
		label = *req.Label
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	if err := snapshotsOff(sb); err != nil {
		return err
	}
	if sb.HostID == "" || sb.State == store.StateCreating {
		return errorf(http.StatusConflict, "conflict", "sandbox %q has no disk yet: it has never started", sb.Name)
	}
	k := keyFrom(r.Context())
	if err := s.labelFree(r.Context(), k, label, nil); err != nil {
		return err
	}
	now := s.now()
	sn := store.Snapshot{ID: store.NewID("snap"), AccountID: sb.AccountID, SandboxID: sb.ID, Sandbox: sb.Name, HostID: sb.HostID,
		Saved: true, Label: label, OS: sb.OS, Size: sb.Size, Status: store.SnapshotCreating, CreatedAt: now}
	if err := s.sealSnapshotEnv(&sn, sb); err != nil {
		return err
	}
	detail := map[string]string{"snapshot": sn.ID}
	if label != "" {
		detail["label"] = label
	}
	sn, err = s.store.CreateSnapshot(r.Context(), sn, s.audit(r, "snapshot.save", sb.Name, detail))
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "not_found", "no sandbox named %q", sb.Name)
	}
	if err != nil {
		return err
	}
	// Another sandbox's copy saved under the label at the same moment, by
	// a key that reaches it: this one gives way rather than replace it.
	if err := s.labelFree(r.Context(), k, label, &sn); err != nil {
		ev := s.audit(r, "snapshot.delete", sb.Name, map[string]string{"snapshot": sn.ID, "label": label, "reason": "the name is another sandbox's"})
		if derr := s.deleteSnapshot(context.WithoutCancel(r.Context()), &sn, ev); derr != nil {
			return errors.Join(err, derr)
		}
		return err
	}
	writeJSON(w, http.StatusAccepted, viewSnapshot(&sn, sb))
	return nil
}

// labelFree refuses (403) a key limited to some sandboxes the saved
// snapshot name label when a saved snapshot of a sandbox it cannot reach
// holds it (a deleted sandbox's included): saving it would replace that
// copy once the new one is ready (hostctl's rule: a copy replaces the
// ones of its name asked before it). With mine, only the copies asked
// before mine count. A key that reaches every sandbox may replace any.
func (s *Server) labelFree(ctx context.Context, k *store.APIKey, label string, mine *store.Snapshot) error {
	if label == "" || !limited(k) {
		return nil
	}
	list, err := s.store.ListSnapshots(ctx, store.SnapshotFilter{AccountID: k.AccountID, SavedOnly: true, Label: label})
	if err != nil {
		return err
	}
	if mine != nil {
		list = slices.DeleteFunc(list, func(o store.Snapshot) bool { return o.ID == mine.ID || !store.AskedBefore(&o, mine) })
	}
	seen, err := s.viewSnapshots(ctx, k, list)
	if err != nil {
		return err
	}
	if len(seen) < len(list) {
		return errorf(http.StatusForbidden, "api_key_sandbox_forbidden", "this API key cannot save under the name %q: it is taken by a saved snapshot of a sandbox the key cannot reach", label)
	}
	return nil
}

func (s *Server) getSandboxSnapshot(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	sn, err := s.findSnapshot(r.Context(), sb, r.PathValue("snap"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSnapshot(&sn, sb))
	return nil
}

// deleteSnapshot marks one snapshot deleted: gone from the API at once,
// its files removed by hostctl.
func (s *Server) deleteSnapshot(ctx context.Context, sn *store.Snapshot, ev *store.AuditEvent) error {
	now := s.now()
	_, err := s.store.UpdateSnapshot(ctx, sn.ID, func(x *store.Snapshot) error {
		if x.DeletedAt != nil {
			return store.ErrNotFound
		}
		x.DeletedAt = &now
		return nil
	}, ev)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "not_found", "no snapshot %s", sn.ID)
	}
	return err
}

func (s *Server) deleteSandboxSnapshot(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	sn, err := s.findSnapshot(r.Context(), sb, r.PathValue("snap"))
	if err != nil {
		return err
	}
	detail := map[string]string{"snapshot": sn.ID}
	if sn.Label != "" {
		detail["label"] = sn.Label
	}
	if err := s.deleteSnapshot(r.Context(), &sn, s.audit(r, "snapshot.delete", sb.Name, detail)); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": sn.ID, "deleted": true})
	return nil
}

// deleteAutoSnapshots deletes every automatic snapshot of the sandbox.
// None is needed to start it (its disk is its own), so none is kept.
func (s *Server) deleteAutoSnapshots(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	list, err := s.store.ListSnapshots(r.Context(), store.SnapshotFilter{AccountID: sb.AccountID, SandboxID: sb.ID})
	if err != nil {
		return err
	}
	deleted := 0
	for _, sn := range list {
		if sn.Saved {
			continue
		}
		var ev *store.AuditEvent
		if deleted == 0 { // one event says it
			ev = s.audit(r, "snapshot.delete", sb.Name, map[string]string{"automatic": "all"})
		}
		if err := s.deleteSnapshot(r.Context(), &sn, ev); err != nil && !isNotFound(err) {
			return err
		}
		deleted++
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": deleted, "kept": 0})
	return nil
}

func isNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// restoreSandbox asks hostctl to roll the sandbox back to one of its
// snapshots: it stops the VM (a running sandbox boots again after),
// snapshots the current disk so the restore can be undone, and copies
// the snapshot's disk in.
func (s *Server) restoreSandbox(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Snapshot *string `json:"snapshot"`
	}
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if req.Snapshot == nil || *req.Snapshot == "" {
		return invalid("snapshot is required: an id, a label or latest")
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	if err := snapshotsOff(sb); err != nil {
		return err
	}
	sn, err := s.findSnapshot(r.Context(), sb, *req.Snapshot)
	if err != nil {
		return err
	}
	if err := available(&sn); err != nil {
		return err
	}
	detail := map[string]string{"snapshot": sn.ID}
	if sn.Label != "" {
		detail["label"] = sn.Label
	}
	up, err := s.store.UpdateSandbox(r.Context(), sb.ID, func(x *store.Sandbox, _ *store.AuditEvent) error {
		if x.RestoreFrom != "" {
			return errorf(http.StatusConflict, "conflict", "a restore of sandbox %q is under way", x.Name)
		}
		x.RestoreFrom = sn.ID
		return nil
	}, s.audit(r, "sandbox.restore", sb.Name, detail))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, viewSandbox(&up))
	return nil
}

// findSaved finds one of the account's saved snapshots by name (label)
// or id.
func (s *Server) findSaved(r *http.Request) (store.Snapshot, error) {
	return s.savedByRef(r, r.PathValue("name"))
}

// savedByRef finds one of the account's saved snapshots by name (label)
// or id, that the request's key reaches.
func (s *Server) savedByRef(r *http.Request, ref string) (store.Snapshot, error) {
	k := keyFrom(r.Context())
	notFound := errorf(http.StatusNotFound, "not_found", "no saved snapshot %q", ref)
	var sn store.Snapshot
	if strings.HasPrefix(ref, "snap_") && len(ref) <= 64 {
		got, err := s.store.Snapshot(r.Context(), k.AccountID, ref)
		if errors.Is(err, store.ErrNotFound) || err == nil && (!got.Saved || got.DeletedAt != nil) {
			return sn, notFound
		}
		if err != nil {
			return sn, err
		}
		sn = got
	} else {
		if checkLabelName("name", ref) != nil {
			return sn, notFound
		}
		list, err := s.store.ListSnapshots(r.Context(), store.SnapshotFilter{AccountID: k.AccountID, SavedOnly: true, Label: ref})
		if err != nil {
			return sn, err
		}
		if len(list) == 0 {
			return sn, notFound
		}
		sn = list[0]
		for _, o := range list {
			if o.Status == store.SnapshotAvailable {
				sn = o
				break
			}
		}
	}
	if v, err := s.viewSnapshots(r.Context(), k, []store.Snapshot{sn}); err != nil || len(v) == 0 {
		if err != nil {
			return sn, err
		}
		return sn, notFound // to a key that cannot reach its sandbox, as if it were not there
	}
	return sn, nil
}

func (s *Server) listSaved(w http.ResponseWriter, r *http.Request) error {
	return s.listAccountSnapshots(w, r, true)
}

func (s *Server) listAllSnapshots(w http.ResponseWriter, r *http.Request) error {
	return s.listAccountSnapshots(w, r, false)
}

func (s *Server) listAccountSnapshots(w http.ResponseWriter, r *http.Request, saved bool) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	k := keyFrom(r.Context())
	list, err := s.store.ListSnapshots(r.Context(), store.SnapshotFilter{AccountID: k.AccountID, SavedOnly: saved})
	if err != nil {
		return err
	}
	out, err := s.viewSnapshots(r.Context(), k, list)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getSaved(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	sn, err := s.findSaved(r)
	if err != nil {
		return err
	}
	v, err := s.viewSnapshots(r.Context(), keyFrom(r.Context()), []store.Snapshot{sn})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v[0])
	return nil
}

func (s *Server) deleteSaved(w http.ResponseWriter, r *http.Request) error {
	sn, err := s.findSaved(r)
	if err != nil {
		return err
	}
	if err := s.deleteSnapshot(r.Context(), &sn, s.audit(r, "snapshot.delete", sn.Label, map[string]string{"snapshot": sn.ID, "label": sn.Label})); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": sn.ID, "name": sn.Label, "deleted": true})
	return nil
}
