package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"froog.tech/froog/sandboxio"
	"froog.tech/froog/store"
)

// liveSandbox finds the path's sandbox for a reading of what runs in it
// now (metrics, processes): one that is not running answers 409
// sandbox_stopped, and is not started (auto-start is for calls that do
// work in a sandbox, the docs' Auto-start section). One made with
// monitoring off answers 409 monitoring_off first, running or not.
func (s *Server) liveSandbox(r *http.Request) (*store.Sandbox, error) {
	sb, err := s.sandboxFor(r)
	if err != nil {
		return nil, err
	}
	if err := monitoringOff(sb); err != nil {
		return nil, err
	}
	return sb, s.live(sb)
}

// live is liveSandbox's check of a sandbox found.
func (s *Server) live(sb *store.Sandbox) error {
	if s.commands == nil {
		return errorf(http.StatusServiceUnavailable, "unavailable", "this API has no connection to sandboxes")
	}
	if sb.State != store.StateRunning {
		return errorf(http.StatusConflict, "sandbox_stopped", "sandbox %q is not running (it is %s)", sb.Name, sb.State)
	}
	return nil
}

// sampleError makes a failed reading of sb the API's answer.
func sampleError(sb *store.Sandbox, err error) error {
	switch {
	case errors.Is(err, sandboxio.ErrBadSample):
		return withCause(errorf(http.StatusBadGateway, "sandbox_unreadable", "cannot read the numbers of sandbox %q; try again", sb.Name), err)
	case errors.Is(err, errLost):
		return withCause(errorf(http.StatusBadGateway, "sandbox_connection_lost", "the connection to the sandbox was lost while reading it"), err)
	}
	return ioError(sb, err)
}

func (s *Server) getMetrics(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.liveSandbox(r)
	if err != nil {
		return err
	}
	m, err := sandboxio.ReadMetrics(r.Context(), s.commands, sb.ID)
	if err != nil {
		return sampleError(sb, err)
	}
	m.SampledAt = s.now().UTC()
	writeJSON(w, http.StatusOK, m)
	return nil
}

// getProcesses answers a running sandbox's processes, live; one that is
// not running answers the busiest of them as it last stopped (live:
// false, store.KeptProcesses), or 409 sandbox_stopped without such a
// sample.
func (s *Server) getProcesses(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	if err := monitoringOff(sb); err != nil {
		return err
	}
	if last := store.KeptProcesses(sb, s.now()); last != nil && sb.State != store.StateRunning {
		var ps []sandboxio.Process
		if err := json.Unmarshal(last.Processes, &ps); err != nil {
			return fmt.Errorf("sandbox %s's last process sample: %w", sb.ID, err)
		}
		writeJSON(w, http.StatusOK, processesAnswer{Live: false, SampledAt: last.At.UTC(), Processes: ps})
		return nil
	}
	if err := s.live(sb); err != nil {
		return err
	}
	ps, err := sandboxio.ReadProcesses(r.Context(), s.commands, sb.ID)
	if err != nil {
		return sampleError(sb, err)
	}
	writeJSON(w, http.StatusOK, processesAnswer{Live: true, SampledAt: s.now().UTC(), Processes: ps})
	return nil
}

type processesAnswer struct {
	Live      bool                `json:"live"`
	SampledAt time.Time           `json:"sampled_at"`
	Processes []sandboxio.Process `json:"processes"`
}
