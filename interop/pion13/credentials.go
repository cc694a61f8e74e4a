package main

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pion/dtls/v4"
	"github.com/pion/dtls/v4/pkg/crypto/ciphersuite"
	"github.com/pion/dtls/v4/pkg/crypto/elliptic"
	"github.com/pion/dtls/v4/pkg/protocol"
)

// groupIDs are the names --groups accepts: every group pion/dtls v4 implements.
var groupIDs = map[string]elliptic.Curve{
	"x25519mlkem768": elliptic.X25519MLKEM768,
	"x25519":         elliptic.X25519,
	"secp256r1":      elliptic.P256,
	"secp384r1":      elliptic.P384,
}

// suiteIDs are the names --suite accepts: the DTLS 1.3 suites, and the DTLS 1.2 ones the pion
// DTLS 1.2 peer uses.
var suiteIDs = []ciphersuite.ID{
	ciphersuite.TLS_AES_128_GCM_SHA256,
	ciphersuite.TLS_AES_256_GCM_SHA384,
	ciphersuite.TLS_CHACHA20_POLY1305_SHA256,
	ciphersuite.TLS_PSK_WITH_AES_128_CCM_8,
	ciphersuite.TLS_PSK_WITH_AES_128_GCM_SHA256,
	ciphersuite.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	ciphersuite.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
}

// peerFlags are the flags both roles share.
type peerFlags struct {
	identity   string
	keyHex     string
	certFile   string
	keyFile    string
	caFile     string
	serverName string
	mutual     bool
	dtls       string
	groups     string
	suite      string
	cid        bool
	moves      string
	timeLimit  time.Duration
	logResends bool
	verbose    bool
}

func (f *peerFlags) register(set *flag.FlagSet) {
	set.StringVar(&f.identity, "psk-identity", "", "external PSK identity")
	set.StringVar(&f.keyHex, "psk", "", "external PSK in hex")
	set.StringVar(&f.certFile, "cert", "", "PEM chain (leaf first): authenticate with this certificate")
	set.StringVar(&f.keyFile, "key", "", "PEM private key of --cert (PKCS#8, SEC 1 or PKCS#1)")
	set.StringVar(&f.caFile, "ca", "", "PEM trust anchors for the peer's chain")
	set.StringVar(&f.serverName, "server-name", "localhost", "client: the name the server's leaf must carry")
	set.BoolVar(&f.mutual, "mutual", false, "server: require and verify a client certificate (needs --ca)")
	set.StringVar(&f.dtls, "dtls", "1.3", "protocol version: 1.3 or 1.2 (only that one)")
	set.StringVar(&f.groups, "groups", "",
		"key exchange groups in preference order, comma separated: x25519mlkem768, x25519, secp256r1, secp384r1 "+
			"(default pion's: a client offers x25519 first, a server prefers x25519mlkem768)")
	set.StringVar(&f.suite, "suite", "", "the one cipher suite to offer or accept, e.g. TLS_AES_128_GCM_SHA256 "+
		"(default pion's for the version)")
	set.BoolVar(&f.cid, "cid", false, "negotiate Connection IDs (server: 8 bytes; client: only send the server's)")
	set.StringVar(&f.moves, "cid-moves", "reject",
		"with --cid, a peer's authenticated CID record from a new address: reject (stay), rrc (check it with "+
			"RFC 9853's return routability check, offered as rrc) or unsafe (follow at once)")
	set.DurationVar(&f.timeLimit, "time-limit", 30*time.Second, "exit with status 2 after this long, whatever happens")
	set.BoolVar(&f.logResends, "log-resends", false, "print a \"resent flight\" line on stderr for each flight resent")
	set.BoolVar(&f.verbose, "v", false, "print pion's own log lines (trace level) on stderr")
}

func (f *peerFlags) usesCertificates() bool {
	return f.certFile != "" || f.caFile != ""
}

// options turns the flags into the pion options both roles share, and the server-only ones.
func (f *peerFlags) options(isServer bool, watch *resendWatch) ([]dtls.Option, []dtls.ServerOption, error) {
	options := []dtls.Option{dtls.WithLoggerFactory(watch)}
	var version protocol.Version
	switch f.dtls {
	case "1.3":
		version = protocol.Version1_3
	case "1.2":
		version = protocol.Version1_2
		// The DTLS 1.2 suites of pion-peer ask for it; DTLS 1.3 has no such extension.
		options = append(options, dtls.WithExtendedMasterSecret(dtls.RequestExtendedMasterSecret))
	default:
		return nil, nil, fmt.Errorf("--dtls %q: 1.3 or 1.2", f.dtls)
	}
	options = append(options, dtls.WithMinVersion(version), dtls.WithMaxVersion(version))

	pskHash := crypto.SHA256
	if f.suite != "" {
		id, err := suiteByName(f.suite)
		if err != nil {
			return nil, nil, err
		}
		options = append(options, dtls.WithCipherSuites(id))
		if id == ciphersuite.TLS_AES_256_GCM_SHA384 {
			// A DTLS 1.3 PSK is bound to its suite's hash.
			pskHash = crypto.SHA384
		}
	}
	if f.groups != "" {
		curves, err := parseGroups(f.groups)
		if err != nil {
			return nil, nil, err
		}
		options = append(options, dtls.WithEllipticCurves(curves...))
	}
	if f.cid {
		generator := dtls.OnlySendCIDGenerator()
		if isServer {
			generator = dtls.RandomCIDGenerator(serverCIDLength)
		}
		policy := dtls.CIDPathMigrationReject
		switch f.moves {
		case "reject":
		case "rrc":
			policy = dtls.CIDPathMigrationRRC
		case "unsafe":
			policy = dtls.CIDPathMigrationUnsafe
		default:
			return nil, nil, fmt.Errorf("--cid-moves %q: reject, rrc or unsafe", f.moves)
		}
		options = append(options, dtls.WithConnectionID(generator, policy))
	}

	if !f.usesCertificates() {
		more, err := f.pskOptions(pskHash)
		return append(options, more...), nil, err
	}
	if f.identity != "" || f.keyHex != "" {
		return nil, nil, errors.New("--psk and --cert/--ca exclude each other")
	}
	more, serverOptions, err := f.certificateOptions(isServer)
	return append(options, more...), serverOptions, err
}

// pskOptions offer one external PSK (client) or accept only that identity (server).
func (f *peerFlags) pskOptions(hash crypto.Hash) ([]dtls.Option, error) {
	if f.identity == "" || f.keyHex == "" {
		return nil, errors.New("--psk-identity and --psk (or --cert/--ca) are required")
	}
	key, err := hex.DecodeString(f.keyHex)
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("--psk is not hex: %q", f.keyHex)
	}
	psk := dtls.PSK{Identity: []byte(f.identity), Key: key, Hash: hash}
	offer := func() ([]dtls.PSK, error) { return []dtls.PSK{psk}, nil }
	lookup := func(identities [][]byte) (*dtls.PSK, error) {
		for _, identity := range identities {
			if bytes.Equal(identity, psk.Identity) {
				return &psk, nil
			}
		}
		return nil, nil
	}
	return []dtls.Option{dtls.WithPSK(offer, lookup)}, nil
}

func (f *peerFlags) certificateOptions(isServer bool) ([]dtls.Option, []dtls.ServerOption, error) {
	var options []dtls.Option
	var serverOptions []dtls.ServerOption
	switch {
	case f.certFile != "":
		if f.keyFile == "" {
			return nil, nil, errors.New("--cert needs --key")
		}
		certificate, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--cert/--key: %w", err)
		}
		options = append(options, dtls.WithCertificates(certificate))
	case isServer:
		return nil, nil, errors.New("a server with certificates needs --cert and --key")
	}
	var anchors *x509.CertPool
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--ca: %w", err)
		}
		anchors = x509.NewCertPool()
		if !anchors.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("--ca: no certificate in %s", f.caFile)
		}
	}
	switch {
	case isServer && f.mutual:
		if anchors == nil {
			return nil, nil, errors.New("--mutual needs --ca to verify client certificates")
		}
		serverOptions = append(serverOptions,
			dtls.WithClientAuth(dtls.RequireAndVerifyClientCert), dtls.WithClientCAs(anchors))
	case !isServer && anchors == nil:
		return nil, nil, errors.New("a client with certificates needs --ca for the server's chain")
	case !isServer:
		options = append(options, dtls.WithRootCAs(anchors), dtls.WithServerName(f.serverName))
	}
	return options, serverOptions, nil
}

func suiteByName(name string) (ciphersuite.ID, error) {
	names := make([]string, 0, len(suiteIDs))
	for _, id := range suiteIDs {
		if id.String() == name {
			return id, nil
		}
		names = append(names, id.String())
	}
	return 0, fmt.Errorf("unknown --suite %q: one of %s", name, strings.Join(names, ", "))
}

func parseGroups(list string) ([]elliptic.Curve, error) {
	var curves []elliptic.Curve
	for _, name := range strings.Split(list, ",") {
		curve, ok := groupIDs[strings.ToLower(strings.TrimSpace(name))]
		if !ok {
			return nil, fmt.Errorf("unknown group %q in --groups: x25519mlkem768, x25519, secp256r1 or secp384r1", name)
		}
		curves = append(curves, curve)
	}
	return curves, nil
}
