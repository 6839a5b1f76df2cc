package froog

import (
	"context"
	"time"
)

// URLs lists its public URLs.
func (h *SandboxHandle) URLs(ctx context.Context) ([]URL, error) {
	res, err := h.c.ListURLsWithResponse(ctx, h.Name)
	if err != nil {
		return nil, err
	}
	return *res.JSON200, nil
}

// Unhost removes port's URL (and its viewer tokens).
func (h *SandboxHandle) Unhost(ctx context.Context, port int) error {
	_, err := h.c.UnhostPortWithResponse(ctx, h.Name, port)
	return err
}

// CreateURLToken makes a viewer token for port's private URL, valid for
// ttl (0: a day); the token and its link are returned only this once.
func (h *SandboxHandle) CreateURLToken(ctx context.Context, port int, ttl time.Duration, label string) (*URLToken, error) {
	body := CreateURLToken{}
	if ttl > 0 {
		body.TtlSecs = Ptr(int(ttl / time.Second))
	}
	if label != "" {
		body.Label = &label
	}
	res, err := h.c.CreateURLTokenWithResponse(ctx, h.Name, port, body)
	if err != nil {
		return nil, err
	}
	return res.JSON201, nil
}

// URLTokens lists port's live viewer tokens (without their secrets).
func (h *SandboxHandle) URLTokens(ctx context.Context, port int) ([]URLToken, error) {
	res, err := h.c.ListURLTokensWithResponse(ctx, h.Name, port)
	if err != nil {
		return nil, err
	}
	return *res.JSON200, nil
}

// RevokeURLToken revokes the viewer token id of port's URL.
func (h *SandboxHandle) RevokeURLToken(ctx context.Context, port int, id string) error {
	_, err := h.c.RevokeURLTokenWithResponse(ctx, h.Name, port, id)
	return err
}
