// pion-webrtc-peer: a data-channel peer on pion/webrtc v4 for fastshake's interop tests.
//
//	pion-webrtc-peer serve --http ADDR [--dtls-role auto|server|client] [--ip ADDR]
//	pion-webrtc-peer connect URL [--messages N] [--size B] [--timeout 20s]
//
// serve answers offers posted to http://ADDR/offer (application/sdp, the answer comes back
// with status 201 once ICE gathering is complete: no trickle) and echoes every message on
// every channel, binary as binary and text as text. connect posts an offer to URL, opens a
// reliable channel "pion", sends N numbered binary messages of B bytes and checks that each
// comes back exactly once and intact.
//
// Both gather host candidates on loopback only (serve --ip: on that one address instead, a
// network namespace's), over UDP/IPv4, without mDNS and without any STUN or TURN server. One line per event goes to standard
// output; errors and pion's own logs (PION_LOG_DEBUG=all, PION_LOG_TRACE=all) go to standard
// error.
package main

import (
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"
)

var printLock sync.Mutex

// say prints one line to standard output.
func say(format string, args ...any) {
	printLock.Lock()
	defer printLock.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

// fail prints to standard error and exits with status 1.
func fail(format string, args ...any) {
	printLock.Lock()
	fmt.Fprintf(os.Stderr, "pion-webrtc-peer: "+format+"\n", args...)
	printLock.Unlock()
	os.Exit(1)
}

// loopbackOnly configures the ICE agent: host candidates on loopback over UDP/IPv4, no
// multicast DNS; no ICE server is ever configured, so no STUN or TURN traffic either.
func loopbackOnly(settings *webrtc.SettingEngine) {
	settings.SetIncludeLoopbackCandidate(true)
	settings.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
	settings.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	settings.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
}

// dtlsDescription is the negotiated DTLS version and cipher suite from the transport stats:
// "DTLS 1.2 TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".
func dtlsDescription(pc *webrtc.PeerConnection) string {
	for _, stats := range pc.GetStats() {
		transport, ok := stats.(webrtc.TransportStats)
		if !ok || transport.TLSVersion == "" {
			continue
		}
		version := transport.TLSVersion
		switch version {
		case "FEFD":
			version = "DTLS 1.2"
		case "FEFC":
			version = "DTLS 1.3"
		}
		return fmt.Sprintf("%s %s", version, transport.DTLSCipher)
	}
	return "version unknown"
}

// selectedPair describes the ICE pair in use, "local -> remote".
func selectedPair(pc *webrtc.PeerConnection) string {
	transport := pc.SCTP().Transport().ICETransport()
	pair, err := transport.GetSelectedCandidatePair()
	if err != nil || pair == nil {
		return "no pair"
	}
	return fmt.Sprintf("%s:%d (%s) -> %s:%d (%s)", pair.Local.Address, pair.Local.Port, pair.Local.Typ,
		pair.Remote.Address, pair.Remote.Port, pair.Remote.Typ)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: pion-webrtc-peer serve --http ADDR [--dtls-role auto|server|client] [--ip ADDR]")
	fmt.Fprintln(os.Stderr, "       pion-webrtc-peer connect URL [--messages N] [--size B] [--timeout 20s]")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "serve":
		serve(os.Args[2:])
	case "connect":
		connect(os.Args[2:])
	default:
		usage()
	}
}
