package api

import (
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/store"
)

const maxKeyName = 100

type sshKeyView struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	PublicKey   string    `json:"public_key"`
	Fingerprint string    `json:"fingerprint"`
	CreatedAt   time.Time `json:"created_at"`
}

func viewSSHKey(k store.SSHKey) sshKeyView {
	return sshKeyView{ID: k.ID, Name: k.Name, PublicKey: k.PublicKey, Fingerprint: k.Fingerprint, CreatedAt: k.CreatedAt}
}

// sshKeyTypes are the key types a sandbox's SSH server is asked to accept.
// DSA is gone from OpenSSH, and certificates would need a CA of the
// account's, which froog does not have.
var sshKeyTypes = []string{
	ssh.KeyAlgoED25519, ssh.KeyAlgoSKED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoSKECDSA256, ssh.KeyAlgoRSA,
}

// ParseSSHKey checks one public key as a user pastes it (an authorized_keys
// line without options, e.g. the content of id_ed25519.pub) and returns it
// in the form sandboxes get: type, key and the comment, on one line.
func ParseSSHKey(line string) (normal, comment, fingerprint string, err error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return "", "", "", errors.New("public_key is empty")
	}
	if strings.ContainsAny(line, "\r\n") {
		return "", "", "", errors.New("public_key is one key on one line")
	}
	if len(line) > 16<<10 {
		return "", "", "", errors.New("public_key is too long")
	}
	key, comment, options, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return "", "", "", errors.New("public_key is not an OpenSSH public key (the content of a .pub file)")
	}
	if len(options) > 0 {
		return "", "", "", errors.New("public_key has authorized_keys options; send the key alone")
	}
	if !slices.Contains(sshKeyTypes, key.Type()) {
		return "", "", "", errors.New("public_key's type " + key.Type() + " is not accepted (use ed25519, ecdsa or rsa)")
	}
	if ck, ok := key.(ssh.CryptoPublicKey); ok && key.Type() == ssh.KeyAlgoRSA {
		if k, ok := ck.CryptoPublicKey().(interface{ Size() int }); ok && k.Size()*8 < 2048 {
			return "", "", "", errors.New("public_key is an RSA key under 2048 bits")
		}
	}
	if strings.ContainsFunc(comment, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return "", "", "", errors.New("public_key's comment has control characters")
	}
	normal = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
	if comment != "" {
		normal += " " + comment
	}
	return normal, comment, ssh.FingerprintSHA256(key), nil
}

func (s *Server) listSSHKeys(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	out := struct {
		SSHKeys []sshKeyView `json:"ssh_keys"`
	}{SSHKeys: []sshKeyView{}}
	if !limited(k) { // a key limited to some sandboxes, by name or label, sees the account's keys no more than its API keys
		list, err := s.store.SSHKeys(r.Context(), k.AccountID)
		if err != nil {
			return err
		}
		for _, key := range list {
			out.SSHKeys = append(out.SSHKeys, viewSSHKey(key))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// accountWide refuses a key limited to some sandboxes or labels: an SSH
// key of the account reaches every sandbox.
func accountWide(k *store.APIKey) error {
	if limited(k) {
		return errorf(http.StatusForbidden, "api_key_sandbox_forbidden", "this API key is limited to some sandboxes, and an SSH key reaches them all")
	}
	return nil
}

func (s *Server) addSSHKey(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	if err := accountWide(k); err != nil {
		return err
	}
	var req struct {
		Name      *string `json:"name"`
		PublicKey *string `json:"public_key"`
	}
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if req.PublicKey == nil {
		return invalid("public_key is required")
	}
	line, comment, fp, err := ParseSSHKey(*req.PublicKey)
	if err != nil {
		return invalid("%s", err.Error())
	}
	name := comment
	if req.Name != nil {
		name = strings.TrimSpace(*req.Name)
		if name == "" || len([]rune(name)) > maxKeyName || strings.ContainsFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) {
			return invalid("name is 1 to %d printable characters", maxKeyName)
		}
	}
	if name == "" {
		name = fp
	}
	ev := s.audit(r, "ssh_key.create", name, map[string]string{"fingerprint": fp})
	key, err := s.store.CreateSSHKey(r.Context(), store.SSHKey{AccountID: k.AccountID, Name: name, PublicKey: line, Fingerprint: fp, CreatedAt: s.now()}, ev)
	if errors.Is(err, store.ErrConflict) {
		return errorf(http.StatusConflict, "ssh_key_exists", "this account has the key %s already", fp)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewSSHKey(key))
	return nil
}

func (s *Server) deleteSSHKey(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	if err := accountWide(k); err != nil {
		return err
	}
	id := r.PathValue("id")
	ev := s.audit(r, "ssh_key.delete", id, nil)
	if err := s.store.DeleteSSHKey(r.Context(), k.AccountID, id, ev); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
	return nil
}

// sandboxSSH says how to log in to a running sandbox: host, port, user and
// the host key to pin (also as a known_hosts line).
func (s *Server) sandboxSSH(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	if sb.State != store.StateRunning || sb.SSHPort == 0 {
		return errorf(http.StatusConflict, "conflict", "sandbox %q is not running (it is %s)", sb.Name, sb.State)
	}
	hostPort := net.JoinHostPort(sb.SSHHost, strconv.Itoa(sb.SSHPort))
	known := hostPort
	if sb.SSHPort != 22 {
		known = "[" + sb.SSHHost + "]:" + strconv.Itoa(sb.SSHPort)
	}
	writeJSON(w, http.StatusOK, map[string]any{"host": sb.SSHHost, "port": sb.SSHPort, "user": "user",
		"host_key": sb.SSHHostKey, "known_hosts": known + " " + sb.SSHHostKey})
	return nil
}
