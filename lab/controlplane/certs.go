package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// identity is one client of the API server: its certificate's subject is how the server's
// authenticators name it (CN = user, O = groups), which RBAC and the Node authorizer then match.
type identity struct {
	file   string // base name of NAME.crt, NAME.key and NAME.kubeconfig
	user   string
	groups []string
}

// runCerts writes everything the control plane authenticates with into one folder. It keeps
// what is already there (a restarted lab keeps its tokens and kubeconfigs valid) and always
// rewrites the kubeconfigs, because the API server's port may change between runs.
func runCerts(args []string) int {
	flags := flag.NewFlagSet("certs", flag.ContinueOnError)
	dir := flags.String("dir", "pki", "folder to write certificates, keys and kubeconfigs into")
	server := flags.String("server", "https://127.0.0.1:6443", "API server URL for the kubeconfigs")
	hosts := flags.String("hosts", "127.0.0.1,localhost",
		"comma-separated IPs and names the API server's certificate is valid for")
	nodes := flags.String("nodes", "", "comma-separated node names to issue kubelet client identities for")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if err := writeCerts(*dir, *server, splitList(*hosts), splitList(*nodes)); err != nil {
		fmt.Fprintf(os.Stderr, "certs: %v\n", err)
		return 1
	}
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func writeCerts(dir, server string, hosts, nodes []string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, caKey, err := loadOrCreateCA(dir, "ca", "kube-lab-ca")
	if err != nil {
		return err
	}
	// The API server forwards requests for aggregated APIs with the user in headers, signed by
	// this second CA's client; the controller manager and scheduler read the CA to trust such
	// requests and log errors every few seconds without one. Separate, as in kubeadm, so that no
	// ordinary client certificate can assert another user's identity in headers.
	proxyCA, proxyKey, err := loadOrCreateCA(dir, "front-proxy-ca", "kube-lab-front-proxy-ca")
	if err != nil {
		return err
	}
	if err := ensureLeaf(dir, "front-proxy-client", proxyCA, proxyKey,
		pkix.Name{CommonName: "front-proxy-client"}, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return err
	}

	// The API server is also reached in-cluster as the "kubernetes" Service, whose ClusterIP is
	// the first address of --service-cluster-ip-range (10.0.0.0/24 in the lab).
	serving := append([]string{"10.0.0.1", "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}, hosts...)
	if err := ensureLeaf(dir, "apiserver", ca, caKey, pkix.Name{CommonName: "kube-apiserver"},
		serving, x509.ExtKeyUsageServerAuth); err != nil {
		return err
	}

	identities := []identity{
		{"admin", "kube-lab-admin", []string{"system:masters"}},
		{"controller-manager", "system:kube-controller-manager", nil},
		{"scheduler", "system:kube-scheduler", nil},
	}
	for _, node := range nodes {
		// The Node authorizer only recognises this exact shape of name and group.
		identities = append(identities, identity{"node-" + node, "system:node:" + node, []string{"system:nodes"}})
	}
	for _, id := range identities {
		subject := pkix.Name{CommonName: id.user, Organization: id.groups}
		if err := ensureLeaf(dir, id.file, ca, caKey, subject, nil, x509.ExtKeyUsageClientAuth); err != nil {
			return err
		}
		if err := writeKubeconfig(dir, id, server); err != nil {
			return err
		}
	}
	return ensureServiceAccountKey(dir)
}

func loadOrCreateCA(dir, name, commonName string) (*x509.Certificate, crypto.Signer, error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if exists(certPath) && exists(keyPath) {
		return loadPair(certPath, keyPath)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	template := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Hour), // tolerate small clock differences
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePair(certPath, keyPath, der, key); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// ensureLeaf issues NAME.crt/NAME.key signed by the CA unless both exist. TLS keys are ECDSA
// P-256: generating them takes microseconds where RSA takes a noticeable fraction of a second.
func ensureLeaf(dir, name string, ca *x509.Certificate, caKey crypto.Signer, subject pkix.Name,
	sans []string, usage x509.ExtKeyUsage) error {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if exists(certPath) && exists(keyPath) {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	template := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, san := range sans {
		if ip := net.ParseIP(san); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else {
			template.DNSNames = append(template.DNSNames, san)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, key.Public(), caKey)
	if err != nil {
		return err
	}
	return writePair(certPath, keyPath, der, key)
}

// ensureServiceAccountKey writes the key pair that signs service-account tokens: the API server
// verifies with sa.pub and signs TokenRequests with sa.key, the controller manager signs the
// tokens it mints with sa.key. RSA, because RS256 is what every token consumer accepts.
func ensureServiceAccountKey(dir string) error {
	keyPath, pubPath := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if exists(keyPath) && exists(pubPath) {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(keyPath, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key), 0o600); err != nil {
		return err
	}
	return writePEM(pubPath, "PUBLIC KEY", pub, 0o644)
}

// writeKubeconfig embeds the certificates rather than pointing at files, so a kubeconfig can be
// copied or mounted on its own.
func writeKubeconfig(dir string, id identity, server string) error {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	caPEM, err := read("ca.crt")
	if err != nil {
		return err
	}
	certPEM, err := read(id.file + ".crt")
	if err != nil {
		return err
	}
	keyPEM, err := read(id.file + ".key")
	if err != nil {
		return err
	}
	config := clientcmdapi.NewConfig()
	config.Clusters["kube-lab"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	config.AuthInfos[id.user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	config.Contexts["kube-lab"] = &clientcmdapi.Context{Cluster: "kube-lab", AuthInfo: id.user}
	config.CurrentContext = "kube-lab"
	return clientcmd.WriteToFile(*config, filepath.Join(dir, id.file+".kubeconfig"))
}

func loadPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	certBlock, _ := pem.Decode(certPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if certBlock == nil || keyBlock == nil {
		return nil, nil, fmt.Errorf("%s or %s is not PEM", certPath, keyPath)
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	return cert, key, nil
}

func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(keyPath, "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return err
	}
	return writePEM(certPath, "CERTIFICATE", der, 0o644)
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}
