// Package sandboxio is what the API does inside a sandbox over its SSH
// connection (the tunnel's sessions): shell commands, synchronous or
// streamed to writers, with a timeout (exec.go); background jobs kept
// on the sandbox's own disk (jobs.go); SFTP sessions for the files
// routes, their small writes coalesced into fewer SSH packets (sftp.go,
// pipe.go), walks and line searches over them (search.go), the calls
// that list, read, write, replace in, delete, move, make folders and
// set modes (fileops.go) and what their errors mean (fileerr.go:
// FileCause), and the unpacking of a .tar.gz into a folder, staged and
// checked before anything moves into place (archive.go); a sandbox's
// metrics and processes, read with one command each (metrics.go). It
// knows nothing of HTTP (arch_test.go): the API maps its errors
// (ErrLost, *UnreachableError, ErrNoJob, *ScriptError, ErrNoSFTP; for
// files *ArchiveError with its Kind ErrBadArchive, ErrTooLarge or
// ErrConflict, ErrNotFolder, ErrIsFolder, ErrNotFile, ErrNotEmpty,
// ErrExists, *ModeError, *BodyError, *RefusedError and *PathError) to
// answers, through small interfaces it declares (api.Commands,
// api.Jobs, api.FileSessions), so that its handlers are testable with
// fakes.
//
// Waiting for a sandbox to run, or for a port to answer, is package
// wake's (a dial through the tunnel), not a command here.
//
// Files: exec.go, jobs.go, sftp.go, pipe.go, search.go, fileops.go,
// fileerr.go, archive.go, metrics.go.
package sandboxio
