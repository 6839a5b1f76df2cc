package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	"froog.tech/froog/store"
)

// maxForkCount is the most copies one fork makes (the docs' --count).
const maxForkCount = 100

// forkNames are the names a fork makes: name itself, or name-1 …
// name-N with a count.
func forkNames(name string, count *int) ([]string, error) {
	if count == nil {
		return []string{name}, nil
	}
	if *count < 1 || *count > maxForkCount {
		return nil, invalid("count must be 1 to %d", maxForkCount)
	}
	out := make([]string, *count)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", name, i+1)
		if err := checkName("name", out[i]); err != nil {
			return nil, invalid("name %q with count %d makes %q, too long: a name is 1-40 of a-z, 0-9 and -", name, *count, out[i])
		}
	}
	return out, nil
}

// forkSnapshot is the snapshot of src a fork asks for (nil: its current
// disk), which must be available.
func (s *Server) forkSnapshot(ctx context.Context, src *store.Sandbox, ref *string) (*store.Snapshot, error) {
	if ref == nil {
		return nil, nil
	}
	if err := snapshotsOff(src); err != nil {
		return nil, err
	}
	sn, err := s.findSnapshot(ctx, src, *ref)
	if err != nil {
		return nil, err
	}
	if err := available(&sn); err != nil {
		return nil, err
	}
	return &sn, nil
}

// createCopies stores the copies a create or a fork with count makes
// (action says which), one sandbox per name, each like proto (with its
// own id, and what own seals to it: its env …), and answers 202 with them.
// They are made all or none: when one cannot be (a name taken, a
// limit), the ones made before it are deleted again and the error says
// why. An Idempotency-Key covers the whole request, as for create.
func (s *Server) createCopies(w http.ResponseWriter, r *http.Request, action string, request []byte, proto store.Sandbox, own func(*store.Sandbox), names []string, detail map[string]string) error {
	return s.idempotent(w, r, request, proto.CreatedAt, func() ([]byte, error) {
		var made []store.Sandbox
		var err error
		for _, name := range names {
			sb := proto
			sb.ID, sb.Name, sb.Labels = store.NewID("sbx"), name, maps.Clone(proto.Labels)
			own(&sb)
			var created store.Sandbox
			created, err = s.store.CreateSandbox(r.Context(), sb, s.audit(r, action, name, maps.Clone(detail)))
			if errors.Is(err, store.ErrConflict) {
				err = errorf(http.StatusConflict, "conflict", "a sandbox named %q exists", name)
			}
			if err != nil {
				break
			}
			made = append(made, created)
		}
		if err != nil {
			for _, sb := range made {
				ev := s.audit(r, "sandbox.delete", sb.Name, map[string]string{"reason": "another of the copies asked with it could not be made"})
				if derr := s.store.DeleteSandbox(context.WithoutCancel(r.Context()), sb.ID, s.now(), ev); derr != nil {
					err = errors.Join(err, derr)
				}
			}
			return nil, err
		}
		views := make([]sandboxView, len(made))
		for i := range made {
			views[i] = viewSandbox(&made[i])
		}
		return json.Marshal(views)
	})
}

// fromSaved makes sb, a new sandbox, start from the saved snapshot
// req.From names (a template): its disk, OS and size (unless the request
// gives a size), and its source's own variables as they were when it was
// saved unless the request sends env; the other settings are the
// request's, not the source sandbox's.
func (s *Server) fromSaved(r *http.Request, req *createRequest, sb *store.Sandbox) error {
	if req.From == nil {
		return nil
	}
	if req.OS != nil {
		return invalid("os comes from the saved snapshot: give from or os, not both")
	}
	sn, err := s.savedByRef(r, *req.From)
	if err != nil {
		return err
	}
	if err := available(&sn); err != nil {
		return err
	}
	if req.Env == nil {
		if req.Env, err = s.openSnapshotEnv(&sn); err != nil {
			return err
		}
	}
	sb.ForkOf, sb.ForkSnapshot, sb.OS = sn.SandboxID, sn.ID, sn.OS
	if req.Size == nil && sn.Size != "" {
		sb.Size = sn.Size
	}
	return nil
}

// errReplayRefused answers a replay to a key that does not reach what the
// first request made: word for word the docs' answer to the same key with
// a different request (422 idempotency_key_reused, toError's for
// store.ErrIdempotencyReused), so it learns nothing of the answer, nor
// that it was another key's.
var errReplayRefused = toError(store.ErrIdempotencyReused, time.Time{})

// mayReplay says whether prev, the answer kept for an Idempotency-Key, may
// be replayed to k: when k sent it, reaches every sandbox, or reaches
// every sandbox the answer made (a create's one or a count's copies, read
// again: a limited key's scope is by the sandboxes as they are now).
func (s *Server) mayReplay(ctx context.Context, k *store.APIKey, prev *store.Idempotency) error {
	if prev.KeyID == k.ID || !limited(k) {
		return nil
	}
	var made []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(prev.Body, &made); err != nil {
		made = made[:0]
		var one struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(prev.Body, &one); err != nil {
			return fmt.Errorf("read a kept answer: %w", err)
		}
		made = append(made, one)
	}
	for _, m := range made {
		sb, err := s.store.SandboxByID(ctx, m.ID)
		if errors.Is(err, store.ErrNotFound) || err == nil && (sb.AccountID != k.AccountID || sb.DeletedAt != nil || !reaches(k, &sb)) {
			return errReplayRefused
		}
		if err != nil {
			return err
		}
	}
	if len(made) == 0 {
		return errReplayRefused
	}
	return nil
}
