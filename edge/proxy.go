package edge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/valyala/fasthttp"

	"froog.tech/froog/tunnel"
)

// dialError is a failure to reach a sandbox's port: the tunnel's own
// words, which hold no byte of any request.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// dial opens a connection to a port inside a sandbox, for either protocol.
func (s *Server) dial(ctx context.Context, sandboxID string, port int) (net.Conn, error) {
	c, err := s.o.Dialer.DialContext(ctx, sandboxID, port)
	if err != nil {
		return nil, &dialError{err}
	}
	return c, nil
}

// proxyProblem maps a failed exchange with the sandbox to the page to
// show. in is the request body as read from the client (nil: none): when
// reading it failed, the client broke the exchange, and gets a 400 that
// does not blame the sandbox. The log says what failed in the edge's own
// words: the errors of HTTP parsers quote the bytes they could not read,
// and those may hold a token.
func (s *Server) proxyProblem(rt *route, requestID string, err error, in *countingReader) problem {
	if in != nil && in.err != nil {
		s.o.Logger.Info("proxy: the client's request body failed", slog.String("request_id", requestID), slog.String("sandbox", rt.sandboxID))
		return errBadRequest
	}
	switch {
	case errors.Is(err, tunnel.ErrNotRunning):
		return errStopped
	case strings.Contains(err.Error(), "connect failed"): // the SSH server found nothing on the port
		return errBadGateway(rt.port)
	}
	s.o.Logger.Warn("proxy", slog.String("request_id", requestID), slog.String("sandbox", rt.sandboxID), slog.String("error", safeError(err)))
	return errBadGateway(rt.port)
}

// safeError describes err for a log line without quoting the exchange.
func safeError(err error) string {
	var de *dialError
	var ne net.Error
	switch {
	case errors.As(err, &de):
		return "dial: " + de.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, net.ErrClosed):
		return "the app closed the connection"
	}
	return "the app's answer could not be read"
}
