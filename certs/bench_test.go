//go:build bench

package certs_test

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// BenchmarkFirstVisit: a new URL's first handshake, until its certificate
// from Pebble (a real ACME exchange on loopback: an order, a challenge
// answered by this edge, finalisation) is served.
func BenchmarkFirstVisit(b *testing.B) {
	r := newACMERig(b, 0, nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		label := fmt.Sprintf("first-%d-%06d", i, time.Now().UnixNano()%1e6)
		b.StopTimer()
		r.url(label, 4000+i%1000)
		r.known(label + "." + domain)
		b.StartTimer()
		r.eventually(label + "." + domain)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/first-visit")
}

// BenchmarkHandshake: full TLS handshakes a second (no resumption) with
// the certificate already cached (ECDSA P-256, as certmagic orders it),
// against nginx serving the same certificate and key, in the same run.
func BenchmarkHandshake(b *testing.B) {
	r := newACMERig(b, 0, nil)
	r.url("hs-1-aaaaaa", 3000)
	r.known("hs-1-aaaaaa." + domain)
	r.eventually("hs-1-aaaaaa." + domain)
	conn, err := tls.Dial("tcp", r.addr, &tls.Config{ServerName: "hs-1-aaaaaa." + domain, RootCAs: r.ca.IssuerRoots()})
	if err != nil {
		b.Fatal(err)
	}
	chain := conn.ConnectionState().PeerCertificates
	conn.Close()
	if _, ok := chain[0].PublicKey.(*ecdsa.PublicKey); !ok {
		b.Fatalf("the certificate's key is %T, want ECDSA", chain[0].PublicKey)
	}
	paths := map[string]string{"edge": r.addr}
	if _, err := exec.LookPath("nginx"); err == nil {
		paths["nginx"] = r.nginxWithSameCert(b, "hs-1-aaaaaa."+domain, chain)
	} else {
		b.Log("nginx is not installed (make bench installs it): the edge alone")
	}
	for name, addr := range paths {
		b.Run(name, func(b *testing.B) {
			// TLS 1.3 with X25519 on both: nginx's OpenSSL 3.0 has no
			// ML-KEM, which Go (the edge) would otherwise prefer.
			cfg := &tls.Config{ServerName: "hs-1-aaaaaa." + domain, RootCAs: r.ca.IssuerRoots(), MinVersion: tls.VersionTLS13,
				CurvePreferences: []tls.CurveID{tls.X25519}}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c, err := tls.Dial("tcp", addr, cfg)
					if err != nil {
						b.Error(err)
						return
					}
					c.Close()
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "handshakes/s")
		})
	}
}

// nginxWithSameCert serves the edge's certificate for name, its key read
// from the store, with nginx on loopback.
func (r *acmeRig) nginxWithSameCert(b *testing.B, name string, chain []*x509.Certificate) string {
	keys, err := r.st.KVList(ctx, "certificates")
	if err != nil {
		b.Fatal(err)
	}
	var keyPEM []byte
	for _, k := range keys {
		if filepath.Base(k) == name+".key" {
			kv, err := r.st.KVGet(ctx, k)
			if err != nil {
				b.Fatal(err)
			}
			keyPEM = kv.Value
		}
	}
	if keyPEM == nil {
		b.Fatalf("no key for %s in %v", name, keys)
	}
	dir := b.TempDir()
	var certPEM []byte
	for _, c := range chain {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	os.WriteFile(filepath.Join(dir, "c.pem"), certPEM, 0o600)
	os.WriteFile(filepath.Join(dir, "k.pem"), keyPEM, 0o600)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	user := ""
	if os.Getuid() == 0 {
		user = "user root;"
	}
	conf := fmt.Sprintf(`%s worker_processes 1; pid %[2]s/nginx.pid; error_log %[2]s/error.log; daemon off;
events { worker_connections 1024; }
http { access_log off; client_body_temp_path %[2]s; proxy_temp_path %[2]s; fastcgi_temp_path %[2]s; uwsgi_temp_path %[2]s; scgi_temp_path %[2]s;
server { listen %[3]s ssl; ssl_certificate %[2]s/c.pem; ssl_certificate_key %[2]s/k.pem; ssl_protocols TLSv1.2 TLSv1.3; ssl_session_tickets off; ssl_session_cache off; return 200; } }`, user, dir, addr)
	os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600)
	cmd := exec.Command("nginx", "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	wait.For(b, 10*time.Second, "nginx listens", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}
