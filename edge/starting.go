package edge

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"hash/fnv"
	"strconv"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
)

// A start you can watch. The "Starting…" page shows how far its
// sandbox's start has got (the stage hostctl writes on the sandbox, from
// its driver) and follows it live: its script asks the page's own
// address again with a Froog-Start-Watch header, and the edge answers
// that request itself, after auth as for any request, once the start has
// moved on from what the page shows (or after startWatchWait): a long
// poll, one answer at a time, so that it needs nothing of either protocol
// but a request and its answer. When the sandbox runs and the port
// answers, the page reloads into the app; a start that fails says at
// which stage. The header never reaches an app: the edge answers every
// request that carries it.

// startWatchHeader marks a Starting page's watch; its value is the
// version the page shows ("" for none yet).
const startWatchHeader = "Froog-Start-Watch"

// startWatchWait bounds one watch's wait for a change: under the
// proxies' idle limits, and short enough that a lost change costs little.
const startWatchWait = 15 * time.Second

// startStatus is what a Starting page shows of its sandbox's start.
type startStatus struct {
	State   string `json:"state"`
	Stage   string `json:"stage,omitempty"`
	Ready   bool   `json:"ready"`  // running, and the port answers: reload
	Failed  bool   `json:"failed"` // the start failed: stop watching
	Version string `json:"version"`
	waited  int    // seconds the page's request was held, for its clock
}

// startOf says where sb's start is, for a request to port.
func startOf(sb *route.Sandbox, port int, answers bool) startStatus {
	st := startStatus{State: "stopped"}
	if sb != nil {
		st.State, st.Stage = sb.State, sb.StartStage
		switch {
		case sb.State == store.StateError:
			st.Failed = true
		case sb.State == store.StateRunning && answers:
			st.Ready = true
		case sb.State == store.StateRunning && sb.SetupRunning:
			st.Stage = "running its setup; waiting for port " + itoa(port) + " to answer"
		case sb.State == store.StateRunning:
			st.Stage = "running; waiting for port " + itoa(port) + " to answer"
		case sb.DesiredState == store.StateRunning && sb.State != store.StateStarting:
			st.Stage = "queued for a host"
		}
	}
	h := fnv.New64a()
	h.Write([]byte(st.State + "\x00" + st.Stage + "\x00" + strconv.FormatBool(st.Ready)))
	st.Version = strconv.FormatUint(h.Sum64(), 36)
	return st
}

// watchStart answers a Starting page's watch: the start's status once it
// differs from the version the page shows, or after startWatchWait.
func (s *Server) watchStart(ex exchange, f *flow) {
	ctx, release := ex.watch()
	defer release()
	ctx, cancel := context.WithTimeout(ctx, startWatchWait)
	defer cancel()
	rt, port := f.d.rt, f.d.port
	var st startStatus
	for {
		changed := s.o.Routes.Changed() // before the read: no change slips between
		sb := s.o.Routes.Sandbox(rt.SandboxID)
		st = startOf(sb, port, sb != nil && sb.State == store.StateRunning && s.answers(ctx, rt.SandboxID, port))
		if st.Version != f.c.startSeen || st.Failed {
			break
		}
		var retry <-chan time.Time
		if sb != nil && sb.State == store.StateRunning {
			retry = time.After(time.Second) // the port: no feed says when it answers
		}
		select {
		case <-changed:
		case <-retry:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	body, _ := json.Marshal(st)
	ex.setResponse("Content-Type", "application/json")
	ex.setResponse("Cache-Control", "no-store")
	f.rec.status = 200
	f.rec.bytesOut.Store(int64(len(body)))
	ex.respond(200, body)
	s.finish(&f.rec)
}

// answers reports whether port of the sandbox takes a connection now.
func (s *Server) answers(ctx context.Context, sandboxID string, port int) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := s.o.Dialer.DialContext(ctx, sandboxID, port)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// startScript follows the start on a Starting page (watchStart); the
// page's CSP lets in this script alone, by its hash.
const startScript = `(() => {
const stage = document.getElementById("stage"), since = document.getElementById("since"), t0 = Date.now() - 1000 * (+since.dataset.waited || 0);
setInterval(() => { since.textContent = Math.round((Date.now() - t0) / 1000) + " s"; }, 1000);
let seen = stage.dataset.version || "";
const watch = async () => {
  for (;;) {
    let st;
    try {
      const r = await fetch(location.href, {headers: {"Froog-Start-Watch": seen}, cache: "no-store", credentials: "same-origin"});
      if (!r.ok) throw new Error(r.status);
      st = await r.json();
    } catch (e) {
      await new Promise(ok => setTimeout(ok, 3000));
      continue;
    }
    seen = st.version;
    if (st.ready) { location.reload(); return; }
    stage.textContent = st.failed ? "The start failed" + (st.stage ? " at: " + st.stage : "") + ". Its owner can see why and start it again." : (st.stage || st.state);
    if (st.failed) return;
  }
};
watch();
})();`

// startingCSP is pageCSP with startScript let in, and its watch.
var startingCSP = func() string {
	sum := sha256.Sum256([]byte(startScript))
	return pageCSP + "; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; connect-src 'self'"
}()
