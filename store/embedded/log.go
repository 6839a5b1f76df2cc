package embedded

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"froog.tech/froog/store"
)

// Tables of the log.
const (
	tAccount  = "account"
	tAPIKey   = "api_key"
	tSSHKey   = "ssh_key"
	tEnv      = "environment"
	tHost     = "host"
	tSandbox  = store.KindSandbox
	tStop     = "stop"
	tURL      = store.KindURL
	tURLToken = store.KindURLToken
	tLink     = store.KindDesktopLink
	tAudit    = "audit"
	tIdem     = "idempotency"
	tKV       = "kv"
	tLease    = "lease"
	tURLName  = "url_name"
	tStart    = "start"
	tSnapshot = store.KindSnapshot
	tDelivery = "delivery"
	tBody     = "delivery_body"
	tWebhook  = "webhook"
	tWhDeliv  = "webhook_delivery"
	tWhTry    = "webhook_attempt"
	tCommand  = "command"
	tOutput   = "command_output"
	tHour     = "command_output_hour"
	tMeta     = "meta"
)

// record is a put (V set) or delete of one row. A line of the log is one
// commit: a JSON array of records, so a commit is replayed whole or not at
// all.
type record struct {
	T   string          `json:"t"`
	ID  string          `json:"id"`
	Del bool            `json:"del,omitempty"`
	V   json.RawMessage `json:"v,omitempty"`

	val any // the typed value, when the record was made in this process
}

type meta struct {
	Seq      int64 `json:"seq"`
	AuditSeq int64 `json:"audit_seq"`
	InboxSeq int64 `json:"inbox_seq,omitempty"` // the last Delivery.Seq given
}

type lease struct {
	Name    string `json:"name"`
	Owner   string `json:"owner"`
	Expires int64  `json:"expires"` // unix nanoseconds
}

type urlName struct {
	AccountID string `json:"account_id"`
	Hostname  string `json:"hostname"`
	Day       string `json:"day"`
}

// startRec is one start of a sandbox, counted against its account's
// start limits; kept for store.StartsKept.
type startRec struct {
	AccountID string    `json:"account_id"`
	At        time.Time `json:"at"`
}

func put(table, id string, v any) record { return record{T: table, ID: id, val: v} }
func del(table, id string) record        { return record{T: table, ID: id, Del: true} }
func metaRecord(m meta) record           { return put(tMeta, "meta", &m) }

// newValue returns a pointer to a zero value of the table's type.
func newValue(table string) (any, error) {
	switch table {
	case tAccount:
		return new(store.Account), nil
	case tAPIKey:
		return new(store.APIKey), nil
	case tSSHKey:
		return new(store.SSHKey), nil
	case tEnv:
		return new(store.Environment), nil
	case tHost:
		return new(store.Host), nil
	case tSandbox:
		return new(store.Sandbox), nil
	case tStop:
		return new(store.Stop), nil
	case tURL:
		return new(store.URL), nil
	case tURLToken:
		return new(store.URLToken), nil
	case tLink:
		return new(store.DesktopLink), nil
	case tAudit:
		return new(store.AuditEvent), nil
	case tIdem:
		return new(store.Idempotency), nil
	case tKV:
		return new(store.KV), nil
	case tLease:
		return new(lease), nil
	case tURLName:
		return new(urlName), nil
	case tStart:
		return new(startRec), nil
	case tSnapshot:
		return new(store.Snapshot), nil
	case tWebhook:
		return new(store.Webhook), nil
	case tWhDeliv:
		return new(store.WebhookDelivery), nil
	case tWhTry:
		return new(store.WebhookAttempt), nil
	case tCommand:
		return new(store.Command), nil
	case tOutput:
		return new(outputRec), nil
	case tHour:
		return new(outputHour), nil
	case tDelivery:
		return new(store.Delivery), nil
	case tBody:
		return new(deliveryBody), nil
	case tMeta:
		return new(meta), nil
	}
	return nil, fmt.Errorf("unknown table %q", table)
}

// openLog replays path (if it exists) into apply, then rewrites it as the
// compact list of rows that snapshot returns, and opens it for appending.
func openLog(dir string, apply func(record) error, snapshot func() []record) (*os.File, *os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("create data folder: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "store.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("data folder %s is in use by another process: %w", dir, err)
	}
	fail := func(err error) (*os.File, *os.File, error) { lock.Close(); return nil, nil, err }

	path := filepath.Join(dir, "store.log")
	if err := replay(path, apply); err != nil {
		return fail(err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fail(fmt.Errorf("compact store log: %w", err))
	}
	w := bufio.NewWriter(f)
	line, err := encode(snapshot())
	if err != nil {
		f.Close()
		return fail(err)
	}
	w.Write(line)
	if err := w.Flush(); err != nil {
		f.Close()
		return fail(fmt.Errorf("compact store log: %w", err))
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fail(fmt.Errorf("compact store log: %w", err))
	}
	f.Close()
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("compact store log: %w", err))
	}
	f, err = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fail(fmt.Errorf("open store log: %w", err))
	}
	return f, lock, nil
}

func replay(path string, apply func(record) error) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open store log: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			// A last line without its newline is a write that never
			// finished (the process died mid-commit): it was never
			// acknowledged, so it is dropped.
			return nil
		}
		if err != nil {
			return fmt.Errorf("read store log: %w", err)
		}
		var recs []record
		if err := json.Unmarshal(bytes.TrimSpace(line), &recs); err != nil {
			return fmt.Errorf("store log line %d: %w", n, err)
		}
		for _, rec := range recs {
			if !rec.Del {
				v, err := newValue(rec.T)
				if err != nil {
					return fmt.Errorf("store log line %d: %w", n, err)
				}
				if err := json.Unmarshal(rec.V, v); err != nil {
					return fmt.Errorf("store log line %d: %w", n, err)
				}
				rec.val = v
			}
			if err := apply(rec); err != nil {
				return fmt.Errorf("store log line %d: %w", n, err)
			}
		}
	}
}

// encode makes one log line of a commit.
func encode(recs []record) ([]byte, error) {
	for i := range recs {
		r := &recs[i]
		if !r.Del && r.V == nil {
			v, err := json.Marshal(r.val)
			if err != nil {
				return nil, fmt.Errorf("encode %s %s: %w", r.T, r.ID, err)
			}
			r.V = v
		}
	}
	line, err := json.Marshal(recs)
	if err != nil {
		return nil, fmt.Errorf("encode commit: %w", err)
	}
	return append(line, '\n'), nil
}
