package kubetest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ControlPlane is a running etcd and kube-apiserver.
type ControlPlane struct {
	// API is the API server's address, https://127.0.0.1:PORT (a
	// self-signed serving certificate).
	API string
	// Token is the bearer token of an admin (system:masters).
	Token string
	// Kubeconfig is a kubeconfig file reaching API as that admin.
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	// Ready is the time from etcd's start to the API server's /readyz.
	Ready time.Duration
	// RootCA is the API server's self-signed serving certificate and the
	// CA that signed it (one PEM file, written at its start), for
	// kube-controller-manager's --root-ca-file: the ca.crt of the pods'
	// service-account token volumes.
	RootCA string
}

// WithServiceAccounts is the API server flag that leaves the
// ServiceAccount admission on (StartControlPlane turns it off unless
// given a --disable-admission-plugins= of its own): pods then mount a
// projected token of their service account, which needs the
// kube-controller-manager's serviceaccount-controller (each namespace's
// default account) and root-ca-certificate-publisher-controller
// (--root-ca-file=RootCA: the kube-root-ca.crt ConfigMap).
const WithServiceAccounts = "--disable-admission-plugins=TaintNodesByCondition"

// StartControlPlane starts etcd and kube-apiserver, binaries from bin,
// files in dir, as components of ps: bearer-token admin, AlwaysAllow
// unless apiserverFlags gives an --authorization-mode= (the API server
// would append a second one to the first), no ServiceAccount admission
// (pods mount no token) unless apiserverFlags gives a
// --disable-admission-plugins= (WithServiceAccounts), and apiserverFlags
// beside these.
func StartControlPlane(t *testing.T, ps *Procs, bin, dir string, apiserverFlags ...string) *ControlPlane {
	t.Helper()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	saKey := write("sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	saPub := write("sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	cp := &ControlPlane{Token: "corepin-e2e-" + fmt.Sprint(time.Now().UnixNano()), RootCA: filepath.Join(dir, "certs", "apiserver.crt")}
	tokens := write("tokens.csv", []byte(cp.Token+",admin,admin,system:masters\n"))

	begin := time.Now()
	var etcdURL string
	StartServing(t, 2, 30*time.Second, func(ports []int) (*Proc, string, string) {
		etcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		data := filepath.Join(dir, "etcd")
		os.RemoveAll(data) // a start that failed may have begun it
		return ps.Start("etcd", nil, filepath.Join(bin, "etcd"), "--data-dir", data,
			"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "default="+peerURL, "--log-level", "warn"), etcdURL + "/health", ""
	})
	StartServing(t, 1, 90*time.Second, func(ports []int) (*Proc, string, string) {
		cp.API = fmt.Sprintf("https://127.0.0.1:%d", ports[0])
		args := append([]string{
			"--etcd-servers=" + etcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", ports[0]), "--cert-dir=" + filepath.Join(dir, "certs"),
			"--token-auth-file=" + tokens,
			"--service-cluster-ip-range=10.96.0.0/16", "--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file=" + saPub, "--service-account-signing-key-file=" + saKey,
		}, apiserverFlags...)
		// Both are lists the API server appends to when given twice.
		for _, def := range []string{"--authorization-mode=AlwaysAllow", "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition"} {
			flag, _, _ := strings.Cut(def, "=")
			if !slices.ContainsFunc(apiserverFlags, func(f string) bool { return strings.HasPrefix(f, flag+"=") }) {
				args = append(args, def)
			}
		}
		return ps.Start("kube-apiserver", nil, filepath.Join(bin, "kube-apiserver"), args...), cp.API + "/readyz", cp.Token
	})
	cp.Ready = time.Since(begin)

	cp.Config = &rest.Config{Host: cp.API, BearerToken: cp.Token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 100, Burst: 200}
	cp.Client, err = kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	cp.Kubeconfig = write("kubeconfig", fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: %q}
contexts:
- name: e2e
  context: {cluster: e2e, user: admin}
current-context: e2e
`, cp.API, cp.Token))
	return cp
}
