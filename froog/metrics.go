package froog

import "context"

// Metrics reads the running sandbox's CPU, memory, disk and network now
// (about a second).
func (h *SandboxHandle) Metrics(ctx context.Context) (*Metrics, error) {
	res, err := h.c.GetSandboxMetricsWithResponse(ctx, h.Name)
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}

// Processes lists the running sandbox's processes, busiest first.
func (h *SandboxHandle) Processes(ctx context.Context) (*ProcessList, error) {
	res, err := h.c.ListSandboxProcessesWithResponse(ctx, h.Name)
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}
