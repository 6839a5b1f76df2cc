package froog

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// ReadFile streams the file at path (relative to ~, or absolute); close it.
func (h *SandboxHandle) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	res, err := h.c.raw.GetFileContent(ctx, h.Name, &GetFileContentParams{Path: path})
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

// WriteFile streams r into the file at path, making its folders; mode
// (octal, e.g. "755") is kept from an existing file when empty. A streamed
// body is sent once: a 429 or 503 is returned, not retried.
func (h *SandboxHandle) WriteFile(ctx context.Context, path string, r io.Reader, mode string) error {
	p := &PutFileContentParams{Path: path}
	if mode != "" {
		p.Mode = &mode
	}
	res, err := h.c.raw.PutFileContentWithBody(ctx, h.Name, p, "application/octet-stream", r)
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// Unpack unpacks a .tar.gz streamed from r into folder (empty: ~): files
// with the same names are replaced, others stay.
func (h *SandboxHandle) Unpack(ctx context.Context, folder string, r io.Reader) (*Unpacked, error) {
	p := &PutFileArchiveParams{}
	if folder != "" {
		p.Path = &folder
	}
	res, err := h.c.PutFileArchiveWithBodyWithResponse(ctx, h.Name, p, "application/gzip", r)
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}

// SSHInfo is where the sandbox's SSH server answers, and its host key.
type SSHInfo struct {
	Host       string `json:"host"`
	Port       int    `json:"port"`
	User       string `json:"user"`
	HostKey    string `json:"host_key"`
	KnownHosts string `json:"known_hosts"`
}

// SSH says how to reach the sandbox over SSH (it must be running).
func (h *SandboxHandle) SSH(ctx context.Context) (*SSHInfo, error) {
	res, err := h.c.SandboxSSHWithResponse(ctx, h.Name)
	if err != nil {
		return nil, err
	}
	var s SSHInfo
	if err := json.Unmarshal(res.Body, &s); err != nil {
		return nil, fmt.Errorf("froog: decode ssh of %s: %w", h.Name, err)
	}
	return &s, nil
}
