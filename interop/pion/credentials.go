package main

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/pion/dtls/v3"
)

// certificateFlags are the credentials of the certificate suites (ECDHE-ECDSA with P-256,
// ECDHE-RSA): with --cert the peer uses them instead of a PSK.
type certificateFlags struct {
	certFile   string
	keyFile    string
	caFile     string
	serverName string
	mutual     bool
}

func (c *certificateFlags) register(set *flag.FlagSet) {
	set.StringVar(&c.certFile, "cert", "", "PEM chain (leaf first): use ECDHE-ECDSA/ECDHE-RSA instead of a PSK")
	set.StringVar(&c.keyFile, "key", "", "PEM private key of --cert (PKCS#8, SEC 1 or PKCS#1)")
	set.StringVar(&c.caFile, "ca", "", "PEM trust anchors for the peer's chain")
	set.StringVar(&c.serverName, "server-name", "localhost", "client: the name the server's leaf must carry")
	set.BoolVar(&c.mutual, "mutual", false,
		"server: require and verify a client certificate; client: send --cert even without --ca")
}

// inUse reports whether the certificate suites were asked for.
func (c *certificateFlags) inUse() bool {
	return c.certFile != "" || c.caFile != ""
}

// certificateOptions turns the flags into pion options, and names the suite offered: the one
// that fits the key of --cert, or both certificate suites for a client without one.
func (c *certificateFlags) options(isServer bool) ([]dtls.Option, []dtls.ServerOption, string, error) {
	var options []dtls.Option
	var serverOptions []dtls.ServerOption
	suites := []dtls.CipherSuiteID{
		dtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, dtls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	}
	suiteName := "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 or TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
	if c.certFile != "" {
		if c.keyFile == "" {
			return nil, nil, "", errors.New("--cert needs --key")
		}
		certificate, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if err != nil {
			return nil, nil, "", fmt.Errorf("--cert/--key: %w", err)
		}
		switch certificate.PrivateKey.(type) {
		case *ecdsa.PrivateKey:
			suites, suiteName = suites[:1], "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
		case *rsa.PrivateKey:
			suites, suiteName = suites[1:], "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
		default:
			return nil, nil, "", errors.New("--key: neither ECDSA nor RSA")
		}
		if !isServer {
			// A client's key only decides what it can sign with, not the suites it offers.
			suites = []dtls.CipherSuiteID{
				dtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, dtls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			}
			suiteName = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 or TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
		}
		options = append(options, dtls.WithCertificates(certificate))
	} else if isServer {
		return nil, nil, "", errors.New("a server with certificate suites needs --cert and --key")
	} else if c.mutual {
		return nil, nil, "", errors.New("--mutual needs --cert and --key")
	}
	options = append(options,
		dtls.WithCipherSuites(suites...),
		dtls.WithExtendedMasterSecret(dtls.RequestExtendedMasterSecret))
	var anchors *x509.CertPool
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, nil, "", fmt.Errorf("--ca: %w", err)
		}
		anchors = x509.NewCertPool()
		if !anchors.AppendCertsFromPEM(pem) {
			return nil, nil, "", fmt.Errorf("--ca: no certificate in %s", c.caFile)
		}
	}
	switch {
	case isServer && c.mutual:
		if anchors == nil {
			return nil, nil, "", errors.New("--mutual needs --ca to verify client certificates")
		}
		serverOptions = append(serverOptions,
			dtls.WithClientAuth(dtls.RequireAndVerifyClientCert), dtls.WithClientCAs(anchors))
	case !isServer && anchors != nil:
		options = append(options, dtls.WithRootCAs(anchors), dtls.WithServerName(c.serverName))
	case !isServer:
		return nil, nil, "", errors.New("a client with certificate suites needs --ca for the server's chain")
	}
	return options, serverOptions, suiteName, nil
}

// credentials are the options of either kind of suite: the PSK of commonFlags, or with --cert
// or --ca the certificate suites. In the latter case common.suite is cleared, so that the
// handshake line names the suite negotiated.
func credentials(common *commonFlags, certs *certificateFlags, isServer bool) ([]dtls.Option, []dtls.ServerOption, error) {
	if !certs.inUse() {
		options, err := common.options(isServer)
		return options, nil, err
	}
	if common.identity != "" || common.keyHex != "" {
		return nil, nil, errors.New("--psk and --cert/--ca exclude each other")
	}
	options, serverOptions, _, err := certs.options(isServer)
	common.suite = ""
	return options, serverOptions, err
}

// negotiatedSuite is the name of the suite the handshake agreed on.
func negotiatedSuite(conn *dtls.Conn) string {
	state, ok := conn.ConnectionState()
	if !ok {
		return "unknown suite"
	}
	return state.CipherSuiteID.String()
}
