package main

// The environment's own certificate authority and keys, made with the standard library only:
// a CA, the API server's serving certificate (IP SANs, so rustls accepts https://127.0.0.1),
// an admin client certificate in system:masters, and the service-account signing key pair.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

type pki struct {
	dir string
	// PEM-encoded material that also goes into the kubeconfig.
	caCert, adminCert, adminKey []byte
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	var err error
	ca, caKey, caPEM, err := p.newCA("ca", "testenv-ca")
	if err != nil {
		return nil, err
	}
	p.caCert = caPEM
	if _, _, err := p.leaf("apiserver", ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	}); err != nil {
		return nil, err
	}
	if p.adminCert, p.adminKey, err = p.leaf("admin", ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "testenv-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, err
	}

	// The front proxy (request-header authentication): the API server's client certificate
	// towards aggregated API servers, and the CA that delegating components (scheduler,
	// controller-manager) read from kube-system/extension-apiserver-authentication.
	proxyCA, proxyKey, _, err := p.newCA("front-proxy-ca", "testenv-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	if _, _, err := p.leaf("front-proxy-client", proxyCA, proxyKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "front-proxy-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := p.writeKey("sa.key", saKey); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.path("sa.pub"), pemBlock("PUBLIC KEY", saPub), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

var notBefore = time.Now().Add(-time.Hour)

const validity = 10 * 365 * 24 * time.Hour

// newCA makes a self-signed CA and writes name.crt and name.key.
func (p *pki) newCA(name, commonName string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	template := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	certPEM := pemBlock("CERTIFICATE", der)
	return cert, key, certPEM, p.writeKeyPair(name, certPEM, key)
}

// leaf makes a certificate signed by ca, writes name.crt and name.key, and returns both PEMs.
func (p *pki) leaf(name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, template *x509.Certificate) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	template.SerialNumber = serial()
	template.NotBefore, template.NotAfter = notBefore, notBefore.Add(validity)
	template.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	certPEM := pemBlock("CERTIFICATE", der)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, pemBlock("PRIVATE KEY", keyDER), p.writeKeyPair(name, certPEM, key)
}

func (p *pki) writeKeyPair(name string, certPEM []byte, key crypto.Signer) error {
	if err := os.WriteFile(p.path(name+".crt"), certPEM, 0o600); err != nil {
		return err
	}
	return p.writeKey(name+".key", key)
}

func (p *pki) writeKey(file string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal %s: %w", file, err)
	}
	return os.WriteFile(p.path(file), pemBlock("PRIVATE KEY", der), 0o600)
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}
