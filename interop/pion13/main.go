// Command pion13-peer is a DTLS 1.3 peer (RFC 9147) built on pion/dtls v4, an independent DTLS 1.3
// implementation for fastshake's interop tests; --dtls 1.2 makes it a DTLS 1.2 peer of the same library.
//
//	pion13-peer server --listen 127.0.0.1:0 (--psk-identity ID --psk HEX | --cert CHAIN.pem --key KEY.pem
//	                   [--ca CA.pem --mutual]) [--dtls 1.3|1.2] [--groups LIST] [--suite NAME] [--cid]
//	                   [--cid-moves reject|rrc|unsafe] [--tickets] [--no-cookie] [--sessions N] [--log-resends]
//	                   [--time-limit 30s]
//	pion13-peer client --connect HOST:PORT (--psk-identity ID --psk HEX | --ca CA.pem [--server-name NAME]
//	                   [--cert CHAIN.pem --key KEY.pem]) [--dtls ...] [--groups ...] [--suite ...] [--cid]
//	                   [--key-update] [--resume] [--log-resends] [--time-limit 30s]
//
// The server echoes each record it receives (and prints it); the client sends each line of its standard
// input and prints the replies. Both print one line on stderr when a handshake is done:
//
//	pion13-peer ROLE: handshake done: version=DTLS1.3 suite=TLS_AES_128_GCM_SHA256 group=x25519
//	psk=none hrr=1 peer_certs=2 cid_out=none cid_in=none resent=0 peer=127.0.0.1:PORT
//
// version and suite and peer_certs come from pion's State; group, psk (none, psk_ke, psk_dhe_ke;
// "psk" for a DTLS 1.2 PSK suite) and hrr (HelloRetryRequests) from the plaintext ServerHello on the
// wire, which State does not describe; cid_out/cid_in (the CID of the records we send and of those
// we receive) from State's export; resent counts the flights this side resent so far.
//
// What pion/dtls v4.0.1 does in DTLS 1.3, and what this peer leaves out:
//   - The version range is WithMinVersion/WithMaxVersion (options.go:581-592; default 1.2 to 1.3);
//     --dtls sets both, so a peer speaks exactly one version.
//   - A 1.3 server always answers the first ClientHello with a HelloRetryRequest carrying a cookie
//     (internal/flight/flight13/flight0handler.go:111-141), unless --no-cookie
//     (WithInsecureSkipVerifyHello); it also sends one to ask for a group the client listed without
//     a key share. A client sends one key share, for its first group.
//   - Suites: TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256
//     (options.go:1129); no CCM suites in 1.3.
//   - Groups: x25519mlkem768 (0x11ec, 1.3 only), x25519, secp256r1, secp384r1
//     (pkg/crypto/elliptic/elliptic.go:74-77; options.go:1378-1391).
//   - An external PSK client offers psk_dhe_ke and psk_ke (internal/handshake/psk.go:238); the
//     server takes psk_dhe_ke whenever the two share a group (internal/handshake/psk_handshake.go:332-335),
//     so psk_ke needs --groups with no group in common.
//   - State (state.go:27-56, 209) gives the version, suite, peer certificates and CIDs; not the
//     group, the PSK mode, a HelloRetryRequest, nor whether a session was resumed.
//   - Resumption by ticket (WithSessionStore, session.go): --tickets makes a server send
//     NewSessionTickets and resume from them; --resume makes a client wait for one, close, and
//     resume in a second handshake (two handshake lines; psk= says the ticket was taken).
//   - Not wired here: early data (WithMaxEarlyDataSize, DetachedConn), ECH, CID updates, a
//     client's own move (AddPath), ALPN, SRTP.
//   - A server with --cid follows a client's authenticated CID record from a new address as
//     --cid-moves says (WithConnectionID's CIDPathMigrationPolicy, connection_id.go): reject (the
//     default), rrc (RFC 9853: rrc offered, the new path checked with path_challenge first) or unsafe.
//   - resent counts only what pion traces: handshake flights resent by timer, after a partial ACK
//     or in answer to the peer's retransmission. pion logs no resend of post-handshake messages
//     (KeyUpdate, NewSessionTicket: internal/handshake/post_handshake.go:1009-1050).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pion/dtls/v4"
	"github.com/pion/dtls/v4/pkg/protocol"
)

// serverCIDLength is the size of the CIDs the server issues.
const serverCIDLength = 8

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: pion13-peer server|client [flags] (-h for the flags)")
		os.Exit(64)
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = runServer(os.Args[2:])
	case "client":
		err = runClient(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: server or client", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pion13-peer %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// exitAfter ends the process with status 2 once the time limit passes: no run of this peer hangs a test.
func exitAfter(role string, limit time.Duration) {
	go func() {
		time.Sleep(limit)
		fmt.Fprintf(os.Stderr, "pion13-peer %s: time limit of %v reached\n", role, limit)
		os.Exit(2)
	}()
}

// exportedState is the part of pion's State export the handshake line reads: the CIDs are not
// exposed otherwise.
type exportedState struct {
	LocalConnectionID  []byte // carried by the records the peer sends to us
	RemoteConnectionID []byte // carried by the records we send
	DTLS13             *struct {
		Send struct {
			UseCID bool
			Active []byte // the peer's CID our records carry now
		}
	}
}

func exportState(state *dtls.State) (exportedState, error) {
	var exported exportedState
	raw, err := state.MarshalBinary()
	if err != nil {
		return exported, err
	}
	err = gob.NewDecoder(bytes.NewReader(raw)).Decode(&exported)
	return exported, err
}

func describeCID(cid []byte) string {
	if len(cid) == 0 {
		return "none"
	}
	return hex.EncodeToString(cid)
}

func versionName(version protocol.Version) string {
	switch version {
	case protocol.Version1_3:
		return "DTLS1.3"
	case protocol.Version1_2:
		return "DTLS1.2"
	}
	return fmt.Sprintf("0x%04x", uint16(version))
}

// handshakeLine prints the one line a role prints once a handshake is done.
func handshakeLine(role string, conn *dtls.Conn, facts helloFacts, watch *resendWatch) error {
	state, ok := conn.ConnectionState()
	if !ok {
		return errors.New("no connection state after the handshake")
	}
	exported, err := exportState(&state)
	if err != nil {
		return fmt.Errorf("export the connection state: %w", err)
	}
	cidOut := exported.RemoteConnectionID
	if exported.DTLS13 != nil {
		cidOut = nil
		if exported.DTLS13.Send.UseCID {
			cidOut = exported.DTLS13.Send.Active
		}
	}
	version := state.NegotiatedVersion()
	psk := "none"
	switch {
	case version == protocol.Version1_3 && facts.pskChosen && facts.keyShare:
		psk = "psk_dhe_ke"
	case version == protocol.Version1_3 && facts.pskChosen:
		psk = "psk_ke"
	case version != protocol.Version1_3 && strings.Contains(state.CipherSuiteID.String(), "PSK"):
		psk = "psk"
	}
	fmt.Fprintf(os.Stderr, "pion13-peer %s: handshake done: version=%s suite=%s group=%s psk=%s hrr=%d "+
		"peer_certs=%d cid_out=%s cid_in=%s resent=%d peer=%s\n",
		role, versionName(version), state.CipherSuiteID, groupName(facts.group), psk, len(facts.retries),
		len(state.PeerCertificates), describeCID(cidOut), describeCID(exported.LocalConnectionID),
		watch.resent(), conn.RemoteAddr())
	return nil
}

func runServer(args []string) error {
	set := flag.NewFlagSet("server", flag.ExitOnError)
	var peer peerFlags
	peer.register(set)
	listen := set.String("listen", "127.0.0.1:0", "address to listen on")
	sessions := set.Int("sessions", 0, "exit after this many sessions have ended (0: serve until the time limit)")
	tickets := set.Bool("tickets", false, "DTLS 1.3: send NewSessionTickets and resume sessions from them")
	noCookie := set.Bool("no-cookie", false, "answer a ClientHello without the cookie exchange (a HelloRetryRequest)")
	_ = set.Parse(args)
	exitAfter("server", peer.timeLimit)

	watch := &resendWatch{role: "server", print: peer.logResends, verbose: peer.verbose}
	options, serverOptions, err := peer.options(true, watch)
	if err != nil {
		return err
	}
	for _, option := range options {
		serverOptions = append(serverOptions, option)
	}
	if *noCookie {
		serverOptions = append(serverOptions, dtls.WithInsecureSkipVerifyHello(true))
	}
	if *tickets {
		serverOptions = append(serverOptions, dtls.WithSessionStore(newMemoryStore()))
	}
	address, err := net.ResolveUDPAddr("udp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	socket, err := net.ListenUDP("udp", address)
	if err != nil {
		return err
	}
	tap := newTapSocket(socket, true)
	listener, err := dtls.Listen(tap, serverOptions...)
	if err != nil {
		return err
	}
	defer listener.Close()
	fmt.Fprintf(os.Stderr, "pion13-peer server: listening on %s\n", socket.LocalAddr())

	for served := 0; *sessions == 0 || served < *sessions; served++ {
		accepted, err := listener.Accept()
		if err != nil {
			return err
		}
		conn, ok := accepted.(*dtls.Conn)
		if !ok {
			accepted.Close()
			return errors.New("the listener returned a connection that is not DTLS")
		}
		// One session at a time: the tests drive one client after the other.
		if err := serveSession(conn, tap, watch); err != nil {
			fmt.Fprintf(os.Stderr, "pion13-peer server: session with %s failed: %v\n", conn.RemoteAddr(), err)
		}
	}
	return nil
}

// serveSession completes a handshake and echoes every record of application data back.
func serveSession(conn *dtls.Conn, tap *tapSocket, watch *resendWatch) error {
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if err := handshakeLine("server", conn, tap.take(conn.RemoteAddr()), watch); err != nil {
		return err
	}
	buffer := make([]byte, 1<<14)
	for {
		n, err := conn.Read(buffer)
		if err != nil {
			fmt.Fprintf(os.Stderr, "pion13-peer server: session with %s ended: %v\n", conn.RemoteAddr(), err)
			return nil
		}
		os.Stdout.Write(buffer[:n])
		if _, err := conn.Write(buffer[:n]); err != nil {
			return fmt.Errorf("echo: %w", err)
		}
	}
}

func runClient(args []string) error {
	set := flag.NewFlagSet("client", flag.ExitOnError)
	var peer peerFlags
	peer.register(set)
	connect := set.String("connect", "", "server address")
	keyUpdate := set.Bool("key-update", false,
		"after the handshake, update the traffic keys (and ask the server to update its own) before sending")
	linger := set.Duration("linger", 300*time.Millisecond, "wait this long for replies after standard input ends")
	resume := set.Bool("resume", false,
		"DTLS 1.3: wait for the server's NewSessionTicket, close, and resume with it in a second handshake")
	_ = set.Parse(args)
	exitAfter("client", peer.timeLimit)

	watch := &resendWatch{role: "client", print: peer.logResends, verbose: peer.verbose}
	options, _, err := peer.options(false, watch)
	if err != nil {
		return err
	}
	store := newMemoryStore()
	clientOptions := make([]dtls.ClientOption, 0, len(options)+1)
	for _, option := range options {
		clientOptions = append(clientOptions, option)
	}
	if *resume {
		clientOptions = append(clientOptions, dtls.WithSessionStore(store))
	}
	remote, err := net.ResolveUDPAddr("udp", *connect)
	if err != nil {
		return fmt.Errorf("--connect: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dial(ctx, remote, clientOptions, watch)
	if err != nil {
		return err
	}
	if *resume {
		if err := awaitTicket(conn, store); err != nil {
			return err
		}
		_ = conn.Close()
		if conn, err = dial(ctx, remote, clientOptions, watch); err != nil {
			return err
		}
	}
	if *keyUpdate {
		if err := updateKeys(ctx, conn); err != nil {
			return err
		}
	}

	replies := make(chan struct{})
	go func() {
		defer close(replies)
		buffer := make([]byte, 1<<14)
		for {
			n, err := conn.Read(buffer)
			if err != nil {
				return
			}
			os.Stdout.Write(buffer[:n])
		}
	}()
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		if _, err := conn.Write([]byte(lines.Text() + "\n")); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
	time.Sleep(*linger)
	closeErr := conn.Close()
	<-replies
	fmt.Fprintf(os.Stderr, "pion13-peer client: done; flights resent: %d\n", watch.resent())
	if closeErr != nil && !strings.Contains(closeErr.Error(), "closed") {
		return closeErr
	}
	return nil
}

// dial runs a client handshake from a new socket and prints its line.
func dial(ctx context.Context, remote *net.UDPAddr, options []dtls.ClientOption, watch *resendWatch) (*dtls.Conn, error) {
	localIP := net.IPv4zero
	if remote.IP.To4() == nil {
		localIP = net.IPv6unspecified
	}
	socket, err := net.ListenUDP("udp", &net.UDPAddr{IP: localIP})
	if err != nil {
		return nil, err
	}
	tap := newTapSocket(socket, false)
	conn, err := dtls.Client(tap, remote, options...)
	if err != nil {
		return nil, err
	}
	if err := conn.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("handshake with %s: %w", remote, err)
	}
	if err := handshakeLine("client", conn, tap.take(remote), watch); err != nil {
		return nil, err
	}
	return conn, nil
}

// awaitTicket reads (pion handles post-handshake messages in Read) until the store holds a
// DTLS 1.3 ticket, for at most 5 s.
func awaitTicket(conn *dtls.Conn, store *memoryStore) error {
	deadline := time.Now().Add(5 * time.Second)
	buffer := make([]byte, 1<<14)
	for time.Now().Before(deadline) {
		if size := store.ticketSize(); size > 0 {
			fmt.Fprintf(os.Stderr, "pion13-peer client: kept a ticket of %d bytes\n", size)
			return nil
		}
		_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := conn.Read(buffer); err != nil && !isTimeout(err) {
			return fmt.Errorf("waiting for a ticket: %w", err)
		}
	}
	return errors.New("no session ticket from the server within 5 s")
}

func isTimeout(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// memoryStore is pion's SessionStore in memory: a client's ticket, or a server's sessions.
type memoryStore struct {
	lock     sync.Mutex
	sessions map[string]dtls.Session
}

func newMemoryStore() *memoryStore {
	return &memoryStore{sessions: map[string]dtls.Session{}}
}

func (s *memoryStore) Set(key []byte, session dtls.Session) error {
	s.lock.Lock()
	defer s.lock.Unlock()
	s.sessions[string(key)] = session
	return nil
}

// Get returns an empty Session when there is none: pion's sign of a miss.
func (s *memoryStore) Get(key []byte) (dtls.Session, error) {
	s.lock.Lock()
	defer s.lock.Unlock()
	return s.sessions[string(key)], nil
}

func (s *memoryStore) Del(key []byte) error {
	s.lock.Lock()
	defer s.lock.Unlock()
	delete(s.sessions, string(key))
	return nil
}

// ticketSize is the length of a DTLS 1.3 ticket held, or 0.
func (s *memoryStore) ticketSize() int {
	s.lock.Lock()
	defer s.lock.Unlock()
	for _, session := range s.sessions {
		if session.Ticket != nil && len(session.ID) > 0 {
			return len(session.ID)
		}
	}
	return 0
}

// updateKeys sends a KeyUpdate asking the server for one too, waits for its ACK, and prints the
// epochs of the keys in use afterwards.
func updateKeys(ctx context.Context, conn *dtls.Conn) error {
	if err := conn.UpdateKeys(ctx, dtls.KeyUpdateOptions{RequestPeerUpdate: true}); err != nil {
		return fmt.Errorf("key update: %w", err)
	}
	state, ok := conn.ConnectionState()
	if !ok || state.KeyUsage == nil {
		fmt.Fprintln(os.Stderr, "pion13-peer client: key update done")
		return nil
	}
	fmt.Fprintf(os.Stderr, "pion13-peer client: key update done: write epoch %d, read epoch %d\n",
		state.KeyUsage.WriteEpoch, state.KeyUsage.ReadEpoch)
	return nil
}
