package froog

import "context"

// History reads a page of the sandbox's command history, newest first
// (params: mode, limit, and the cursor of the page before; nil for the
// newest). It reads the store: a stopped sandbox has one too.
func (h *SandboxHandle) History(ctx context.Context, params *ListCommandHistoryParams) (*CommandHistoryPage, error) {
	res, err := h.c.ListCommandHistoryWithResponse(ctx, h.Name, params)
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}

// Command reads one record of the history: an exec's cmd_… id or a
// background command's job_… id.
func (h *SandboxHandle) Command(ctx context.Context, id string) (*CommandRecord, error) {
	res, err := h.c.GetCommandHistoryWithResponse(ctx, h.Name, id)
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}

// CommandLogs reads a recorded command's stored output of stream
// ("stdout" or "stderr") from offset, as text: at most 1 MiB a read,
// with the offset to read from next and whether the command has ended
// and all of it was read.
func (h *SandboxHandle) CommandLogs(ctx context.Context, id, stream string, offset int) (*CommandLogs, error) {
	s := GetCommandHistoryLogsParamsStream(stream)
	res, err := h.c.GetCommandHistoryLogsWithResponse(ctx, h.Name, id, &GetCommandHistoryLogsParams{Stream: &s, Offset: &offset})
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}
