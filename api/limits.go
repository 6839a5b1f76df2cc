package api

import (
	"net/http"

	"froog.tech/froog/store"
)

// windowView is where the account stands in one start window.
type windowView struct {
	Limit      int   `json:"limit"`
	Used       int   `json:"used"`
	Remaining  int   `json:"remaining"`
	WindowSecs int64 `json:"window_secs"`
	// RetryAfter is the seconds until the window allows a start: 0 while
	// it allows one now.
	RetryAfter int `json:"retry_after"`
}

// limitsView is GET /v1/limits: sandboxes at once and the start windows,
// each under the name a 429 limit_reached gives it.
type limitsView struct {
	SandboxesAtOnce struct {
		Max     int `json:"max"`
		Running int `json:"running"`
	} `json:"sandboxes_at_once"`
	StartsPerMinute windowView `json:"starts_per_minute"`
	StartsPerHour   windowView `json:"starts_per_hour"`
	StartsPerDay    windowView `json:"starts_per_day"`
	// SavedSnapshotAllowance is the docs' saved_snapshot_allowance: how
	// many saved snapshots the plan includes, how many the account keeps,
	// how many of those are past the included ones, and their list price
	// (billing itself is the control plane's).
	SavedSnapshotAllowance struct {
		Included            int     `json:"included"`
		Used                int     `json:"used"`
		Extra               int     `json:"extra"`
		PricePerExtraDayUSD float64 `json:"price_per_extra_day_usd"`
	} `json:"saved_snapshot_allowance"`
}

func (s *Server) getLimits(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	k := keyFrom(r.Context())
	if limited(k) {
		return errorf(http.StatusForbidden, "forbidden", "a key limited to some sandboxes cannot read the account's limits")
	}
	now := s.now()
	u, err := s.store.AccountUsage(r.Context(), k.AccountID, now)
	if err != nil {
		return err
	}
	var v limitsView
	v.SandboxesAtOnce.Max, v.SandboxesAtOnce.Running = u.Account.MaxSandboxes, u.Running
	for _, wu := range store.StartUsage(u.Account, u.Starts, now) {
		wv := windowView{Limit: wu.Max, Used: wu.Used, Remaining: wu.Remaining(), WindowSecs: int64(wu.Length.Seconds())}
		if wu.FreeAt.After(now) {
			wv.RetryAfter = ceilSecs(wu.FreeAt.Sub(now))
		}
		switch wu.Limit {
		case "starts_per_minute":
			v.StartsPerMinute = wv
		case "starts_per_hour":
			v.StartsPerHour = wv
		case "starts_per_day":
			v.StartsPerDay = wv
		}
	}
	saved, err := s.store.ListSnapshots(r.Context(), store.SnapshotFilter{AccountID: k.AccountID, SavedOnly: true})
	if err != nil {
		return err
	}
	a := &v.SavedSnapshotAllowance
	a.Included, a.Used, a.PricePerExtraDayUSD = u.Account.SavedIncluded(), store.SavedKept(saved), store.PricePerExtraSavedSnapshotDayUSD
	a.Extra = max(a.Used-a.Included, 0)
	writeJSON(w, http.StatusOK, v)
	return nil
}
