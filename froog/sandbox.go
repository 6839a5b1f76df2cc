package froog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// Sandboxes creates and lists an account's sandboxes (c.Sandboxes).
type Sandboxes struct{ c *Client }

// The sizes, as the docs' froog.Ptr(froog.SizeSmall).
const (
	SizeSmall   = CreateSandboxSizeSmall
	SizeDefault = CreateSandboxSizeDefault
	SizeLarge   = CreateSandboxSizeLarge
)

// Create makes a sandbox and waits until it runs (CreateMany for Count).
// It sends an Idempotency-Key, so the doer's retries never make two.
func (s Sandboxes) Create(ctx context.Context, body CreateSandbox) (*SandboxHandle, error) {
	if body.Count != nil {
		return nil, errors.New("froog: Create makes one sandbox: CreateMany for Count")
	}
	hs, err := s.CreateMany(ctx, body)
	if err != nil {
		return nil, err
	}
	return hs[0], nil
}

// CreateMany makes sandboxes (one, or body.Count) and waits until each
// runs, with an Idempotency-Key as Create.
func (s Sandboxes) CreateMany(ctx context.Context, body CreateSandbox) ([]*SandboxHandle, error) {
	res, err := s.c.CreateSandboxesWithResponse(ctx, &CreateSandboxesParams{IdempotencyKey: Ptr(idempotencyKey())}, body)
	if err != nil {
		return nil, err
	}
	made, err := sandboxesIn(res.Body)
	if err != nil {
		return nil, err
	}
	if len(made) == 0 {
		return nil, errors.New("froog: the create made no sandbox")
	}
	return s.c.waitAll(ctx, made)
}

// List lists sandboxes, filtered by params (nil: all).
func (s Sandboxes) List(ctx context.Context, params *ListSandboxesParams) ([]Sandbox, error) {
	if params == nil {
		params = &ListSandboxesParams{}
	}
	res, err := s.c.ListSandboxesWithResponse(ctx, params)
	if err != nil {
		return nil, err
	}
	return *res.JSON200, nil
}

// Sandbox is a handle on the sandbox called name; it sends no request.
func (c *Client) Sandbox(name string) *SandboxHandle { return &SandboxHandle{c: c, Name: name} }

// SandboxHandle acts on one sandbox.
type SandboxHandle struct {
	c    *Client
	Name string
}

// Info reads the sandbox.
func (h *SandboxHandle) Info(ctx context.Context) (*Sandbox, error) {
	res, err := h.c.GetSandboxWithResponse(ctx, h.Name)
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}

// Start starts it and waits until it runs; body may be the zero value.
func (h *SandboxHandle) Start(ctx context.Context, body StartSandbox) (*Sandbox, error) {
	if _, err := h.c.StartSandboxWithResponse(ctx, h.Name, body); err != nil {
		return nil, err
	}
	return h.c.WaitUntil(ctx, h.Name, "running")
}

// Stop stops it (the disk is snapshotted) and waits until it has stopped.
func (h *SandboxHandle) Stop(ctx context.Context) (*Sandbox, error) {
	if _, err := h.c.StopSandboxWithResponse(ctx, h.Name); err != nil {
		return nil, err
	}
	return h.c.WaitUntil(ctx, h.Name, "stopped")
}

// Delete deletes it.
func (h *SandboxHandle) Delete(ctx context.Context) error {
	_, err := h.c.DeleteSandboxWithResponse(ctx, h.Name)
	return err
}

// Fork makes a sandbox called name from this one's disk and waits until
// it runs; ForkMany takes a snapshot, a count and the rest.
func (h *SandboxHandle) Fork(ctx context.Context, name string) (*SandboxHandle, error) {
	hs, err := h.ForkMany(ctx, ForkSandbox{Name: name})
	if err != nil {
		return nil, err
	}
	return hs[0], nil
}

// ForkMany makes new sandboxes from this one's disk or body.Snapshot
// (body.Name, or body.Count of them) and waits until each runs. It sends
// an Idempotency-Key, as Create does.
func (h *SandboxHandle) ForkMany(ctx context.Context, body ForkSandbox) ([]*SandboxHandle, error) {
	res, err := h.c.ForkSandboxWithResponse(ctx, h.Name, &ForkSandboxParams{IdempotencyKey: Ptr(idempotencyKey())}, body)
	if err != nil {
		return nil, err
	}
	made, err := sandboxesIn(res.Body)
	if err != nil {
		return nil, err
	}
	if len(made) == 0 {
		return nil, fmt.Errorf("froog: fork %s made no sandbox", h.Name)
	}
	return h.c.waitAll(ctx, made)
}

// Restore rolls it back to a snapshot (an id, or a saved snapshot's name)
// and waits until it runs from it: restore_from is set until the restore
// is done, and a running sandbox still runs its old disk until then.
func (h *SandboxHandle) Restore(ctx context.Context, snapshot string) (*Sandbox, error) {
	if _, err := h.c.RestoreSandboxWithResponse(ctx, h.Name, RestoreSandbox{Snapshot: snapshot}); err != nil {
		return nil, err
	}
	return h.c.waitFor(ctx, h.Name, "running from the snapshot", func(sb *Sandbox) bool {
		return Text(sb.State) == "running" && Text(sb.RestoreFrom) == ""
	})
}

// Snapshot saves its disk under label (empty: an unnamed snapshot).
func (h *SandboxHandle) Snapshot(ctx context.Context, label string) (*Snapshot, error) {
	body := SaveSnapshot{}
	if label != "" {
		body.Label = &label
	}
	res, err := h.c.SaveSnapshotWithResponse(ctx, h.Name, body)
	if err != nil {
		return nil, err
	}
	return res.JSON202, nil
}

// Host gives port a URL (see HostPort's fields) and returns it.
func (h *SandboxHandle) Host(ctx context.Context, body HostPort) (*URL, error) {
	res, err := h.c.HostPortWithResponse(ctx, h.Name, body)
	if err != nil {
		return nil, err
	}
	if res.JSON201 != nil {
		return res.JSON201, nil
	}
	return res.JSON200, nil
}

// WaitForPort waits until something listens on port inside the sandbox,
// up to timeout (0: the server's 60 s); it reports whether it did.
func (h *SandboxHandle) WaitForPort(ctx context.Context, port int, timeout time.Duration) (bool, error) {
	body := WaitForPortJSONRequestBody{Port: port}
	if timeout > 0 {
		body.TimeoutSecs = Ptr(int((timeout + time.Second - 1) / time.Second))
	}
	res, err := h.c.WaitForPortWithResponse(ctx, h.Name, body)
	if err != nil {
		return false, err
	}
	var w struct{ Ready bool }
	return w.Ready, json.Unmarshal(res.Body, &w)
}

// Link is a desktop, browser-view or wall link. Treat URL as a secret.
type Link struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Desktop makes a link to its desktop.
func (h *SandboxHandle) Desktop(ctx context.Context, params *CreateDesktopLinkParams) (*Link, error) {
	res, err := h.c.CreateDesktopLinkWithResponse(ctx, h.Name, params)
	if err != nil {
		return nil, err
	}
	return linkIn(res.Body)
}

// BrowserOptions are a browser-view link's settings; zero values are the
// server's defaults.
type BrowserOptions struct {
	// Theme is the viewer's, dark or light.
	Theme string
	// Profile is Chrome's profile folder in the sandbox.
	Profile string
}

// Browser makes a link to its browser view.
func (h *SandboxHandle) Browser(ctx context.Context, o BrowserOptions) (*Link, error) {
	var body CreateBrowserLinkJSONRequestBody
	var params CreateBrowserLinkParams
	if o.Theme != "" {
		params.Theme = Ptr(CreateBrowserLinkParamsTheme(o.Theme))
	}
	if o.Profile != "" {
		body.Profile = &o.Profile
	}
	res, err := h.c.CreateBrowserLinkWithResponse(ctx, h.Name, &params, body)
	if err != nil {
		return nil, err
	}
	return linkIn(res.Body)
}

// Wall makes a link to the account's wall.
func (c *Client) Wall(ctx context.Context) (*Link, error) {
	res, err := c.CreateWallLinkWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	return linkIn(res.Body)
}

func linkIn(b []byte) (*Link, error) {
	var l Link
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("froog: decode a link: %w", err)
	}
	return &l, nil
}

// WaitUntil polls the sandbox until its state is state; a sandbox in
// error (when state is not) is an error.
func (c *Client) WaitUntil(ctx context.Context, name, state string) (*Sandbox, error) {
	return c.waitFor(ctx, name, state, func(sb *Sandbox) bool { return Text(sb.State) == state })
}

// waitFor polls the sandbox until done holds (what says it, for the
// error); a sandbox in error, when done does not hold, is an error,
// unless a restore is under way (one recovers a sandbox in error).
func (c *Client) waitFor(ctx context.Context, name, what string, done func(*Sandbox) bool) (*Sandbox, error) {
	for {
		res, err := c.GetSandboxWithResponse(ctx, name)
		if err != nil {
			return nil, err
		}
		sb := res.JSON200
		if sb == nil {
			return nil, fmt.Errorf("froog: GET sandbox %s: an answer %d the API does not document", name, res.StatusCode())
		}
		switch {
		case done(sb):
			return sb, nil
		case Text(sb.State) == "error" && Text(sb.RestoreFrom) == "":
			return sb, fmt.Errorf("froog: sandbox %s is in error: %s", name, Text(sb.Error))
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return nil, fmt.Errorf("froog: wait for sandbox %s to be %s: %w", name, what, err)
		}
	}
}

// waitAll waits until each of made runs.
func (c *Client) waitAll(ctx context.Context, made []Sandbox) ([]*SandboxHandle, error) {
	hs := make([]*SandboxHandle, 0, len(made))
	for _, sb := range made {
		name := Text(sb.Name)
		if _, err := c.WaitUntil(ctx, name, "running"); err != nil {
			return hs, err
		}
		hs = append(hs, c.Sandbox(name))
	}
	return hs, nil
}

// sandboxesIn decodes a create's or fork's answer: one sandbox, or an
// array with count.
func sandboxesIn(b []byte) ([]Sandbox, error) {
	var many []Sandbox
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '[' {
		if err := json.Unmarshal(b, &many); err != nil {
			return nil, fmt.Errorf("froog: decode sandboxes: %w", err)
		}
		return many, nil
	}
	var one Sandbox
	if err := json.Unmarshal(b, &one); err != nil {
		return nil, fmt.Errorf("froog: decode a sandbox: %w", err)
	}
	return []Sandbox{one}, nil
}

// Text is a generated field as text: a pointer followed, nil as "", a
// time in RFC 3339.
func Text(v any) string {
	r := reflect.ValueOf(v)
	for r.IsValid() && (r.Kind() == reflect.Pointer || r.Kind() == reflect.Interface) {
		if r.IsNil() {
			return ""
		}
		r = r.Elem()
	}
	if !r.IsValid() {
		return ""
	}
	if t, ok := r.Interface().(time.Time); ok {
		return t.Format(time.RFC3339)
	}
	return fmt.Sprint(r.Interface())
}
