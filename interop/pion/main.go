// Command pion-peer is a DTLS 1.2 peer (PSK or certificates) built on pion/dtls, the independent
// implementation that fastshake's Connection ID (RFC 9146) and caching interop tests run against.
//
//	pion-peer server --listen 127.0.0.1:0 --psk-identity ID --psk HEX [--suite NAME] [--cid] [--sessions N]
//	pion-peer server ... --cert CHAIN.pem --key KEY.pem [--ca CA.pem --mutual]
//	pion-peer server-concurrent --listen 127.0.0.1:0 (--psk-identity ID --psk HEX [--suite NAME] | --cert ... --key ...)
//	pion-peer client --connect HOST:PORT --psk-identity ID --psk HEX [--suite NAME] [--cid]
//	                 [--receive-cid-len N] [--move-after N]
//	pion-peer client ... --ca CA.pem [--server-name NAME] [--cert CHAIN.pem --key KEY.pem]
//
// With --cert or --ca the peer uses the certificate suites (ECDHE-ECDSA with P-256, ECDHE-RSA,
// AES-128-GCM) instead of a PSK; --mutual makes the server require a client certificate.
//
// The server echoes what it receives (and prints it); the client sends each line of its standard input
// and prints the replies. Both print one line on stderr when the handshake is done, naming the CID that
// the records each way carry, and the client counts the tls12_cid records it sends and receives.
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
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/dtls/v3"
)

// serverCIDLength is the size of the CIDs the server issues (and the client asks for with a number).
const serverCIDLength = 8

// contentTypeCID is the record content type tls12_cid (RFC 9146).
const contentTypeCID = 25

type commonFlags struct {
	identity  string
	keyHex    string
	suite     string
	cid       bool
	timeLimit time.Duration
	verbose   bool
}

func (c *commonFlags) register(set *flag.FlagSet) {
	set.StringVar(&c.identity, "psk-identity", "", "PSK identity")
	set.StringVar(&c.keyHex, "psk", "", "PSK in hex")
	set.StringVar(&c.suite, "suite", "TLS_PSK_WITH_AES_128_CCM_8",
		"TLS_PSK_WITH_AES_128_CCM_8 or TLS_PSK_WITH_AES_128_GCM_SHA256")
	set.BoolVar(&c.cid, "cid", false, "negotiate a Connection ID (RFC 9146)")
	set.DurationVar(&c.timeLimit, "time-limit", 30*time.Second, "exit with status 2 after this long, whatever happens")
	set.BoolVar(&c.verbose, "v", false, "print every datagram's records on stderr")
}

// options turns the flags into the pion options both roles share.
func (c *commonFlags) options(isServer bool) ([]dtls.Option, error) {
	if c.identity == "" || c.keyHex == "" {
		return nil, errors.New("--psk-identity and --psk are required")
	}
	key, err := hex.DecodeString(c.keyHex)
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("--psk is not hex: %q", c.keyHex)
	}
	var suite dtls.CipherSuiteID
	switch c.suite {
	case "TLS_PSK_WITH_AES_128_CCM_8":
		suite = dtls.TLS_PSK_WITH_AES_128_CCM_8
	case "TLS_PSK_WITH_AES_128_GCM_SHA256":
		suite = dtls.TLS_PSK_WITH_AES_128_GCM_SHA256
	default:
		return nil, fmt.Errorf("unknown --suite %q", c.suite)
	}
	identity := c.identity
	return []dtls.Option{
		dtls.WithPSK(func(hintOrIdentity []byte) ([]byte, error) {
			// The server's callback gets the client's identity; the client's gets the server's hint.
			if isServer && string(hintOrIdentity) != identity {
				return nil, fmt.Errorf("unknown PSK identity %q", hintOrIdentity)
			}
			return key, nil
		}),
		dtls.WithPSKIdentityHint([]byte(identity)),
		dtls.WithCipherSuites(suite),
		dtls.WithExtendedMasterSecret(dtls.RequestExtendedMasterSecret),
	}, nil
}

// exitAfter ends the process with status 2 once the time limit passes: no run of this peer hangs a test.
func exitAfter(role string, limit time.Duration) {
	go func() {
		time.Sleep(limit)
		fmt.Fprintf(os.Stderr, "pion-peer %s: time limit of %v reached\n", role, limit)
		os.Exit(2)
	}()
}

// connectionIDs reads the CIDs pion negotiated: they are only exposed through the state's export.
type connectionIDs struct {
	LocalConnectionID  []byte // carried by the records the peer sends to us
	RemoteConnectionID []byte // carried by the records we send
}

func negotiatedCIDs(conn *dtls.Conn) (connectionIDs, error) {
	var ids connectionIDs
	state, ok := conn.ConnectionState()
	if !ok {
		return ids, errors.New("no connection state")
	}
	exported, err := state.MarshalBinary()
	if err != nil {
		return ids, err
	}
	err = gob.NewDecoder(bytes.NewReader(exported)).Decode(&ids)
	return ids, err
}

func describeCID(cid []byte) string {
	if len(cid) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d bytes (%s)", len(cid), hex.EncodeToString(cid))
}

// handshakeLine is the one line each role prints once the handshake is done.
func handshakeLine(role string, conn *dtls.Conn, suite string) (connectionIDs, error) {
	if suite == "" {
		suite = negotiatedSuite(conn)
	}
	ids, err := negotiatedCIDs(conn)
	if err != nil {
		return ids, err
	}
	fmt.Fprintf(os.Stderr, "pion-peer %s: handshake done: %s with %s; cid out: %s; cid in: %s\n",
		role, suite, conn.RemoteAddr(), describeCID(ids.RemoteConnectionID), describeCID(ids.LocalConnectionID))
	return ids, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: pion-peer server|client [flags] (-h for the flags)")
		os.Exit(64)
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = runServer(os.Args[2:])
	case "server-concurrent":
		err = runConcurrentServer(os.Args[2:])
	case "client":
		err = runClient(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: server, server-concurrent or client", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pion-peer %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// startServer parses the flags of a server mode (more adds the mode's own), starts its time limit
// and opens its listener.
func startServer(mode string, args []string, more func(*flag.FlagSet)) (*commonFlags, net.Listener, error) {
	set := flag.NewFlagSet(mode, flag.ExitOnError)
	common := &commonFlags{}
	common.register(set)
	var certs certificateFlags
	certs.register(set)
	listen := set.String("listen", "127.0.0.1:0", "address to listen on")
	if more != nil {
		more(set)
	}
	_ = set.Parse(args)
	exitAfter(mode, common.timeLimit)
	listener, err := listenDTLS(mode, common, &certs, *listen)
	return common, listener, err
}

// acceptHandshake completes a server session's handshake within ten seconds.
func acceptHandshake(conn *dtls.Conn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	return nil
}

func runServer(args []string) error {
	var sessions *int
	common, listener, err := startServer("server", args, func(set *flag.FlagSet) {
		sessions = set.Int("sessions", 1, "exit after this many sessions have ended")
	})
	if err != nil {
		return err
	}
	defer listener.Close()

	for served := 0; served < *sessions; served++ {
		accepted, err := listener.Accept()
		if err != nil {
			return err
		}
		conn, ok := accepted.(*dtls.Conn)
		if !ok {
			return errors.New("the listener returned a connection that is not DTLS")
		}
		// One session at a time: the tests drive one client after the other.
		if err := serveSession(conn, common.suite); err != nil {
			fmt.Fprintf(os.Stderr, "pion-peer server: session with %s failed: %v\n", conn.RemoteAddr(), err)
		}
	}
	return nil
}

// serveSession echoes every record of application data back to the session's current address
// (which pion moves on a newer tls12_cid record from elsewhere) and prints it.
func serveSession(conn *dtls.Conn, suite string) error {
	defer conn.Close()
	if err := acceptHandshake(conn); err != nil {
		return err
	}
	if _, err := handshakeLine("server", conn, suite); err != nil {
		return err
	}
	buffer := make([]byte, 1<<14)
	for {
		n, err := conn.Read(buffer)
		if err != nil {
			fmt.Fprintf(os.Stderr, "pion-peer server: session with %s ended: %v\n", conn.RemoteAddr(), err)
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
	var common commonFlags
	common.register(set)
	var certs certificateFlags
	certs.register(set)
	connect := set.String("connect", "", "server address")
	receiveCIDLength := set.Int("receive-cid-len", 0,
		"with --cid: ask the server for records carrying a CID of this many bytes (0: send CIDs only)")
	moveAfter := set.Int("move-after", 0,
		"after this many lines, move to a new local port before sending the next (0: never)")
	linger := set.Duration("linger", 300*time.Millisecond, "wait this long for replies after standard input ends")
	_ = set.Parse(args)
	exitAfter("client", common.timeLimit)

	options, _, err := credentials(&common, &certs, false)
	if err != nil {
		return err
	}
	clientOptions := make([]dtls.ClientOption, 0, len(options)+1)
	for _, option := range options {
		clientOptions = append(clientOptions, option)
	}
	if common.cid {
		generator := dtls.OnlySendCIDGenerator()
		if *receiveCIDLength > 0 {
			generator = dtls.RandomCIDGenerator(*receiveCIDLength)
		}
		clientOptions = append(clientOptions, dtls.WithConnectionIDGenerator(generator))
	}
	remote, err := net.ResolveUDPAddr("udp", *connect)
	if err != nil {
		return fmt.Errorf("--connect: %w", err)
	}
	localCIDLength := 0
	if common.cid {
		localCIDLength = *receiveCIDLength
	}
	socket, err := newMovableSocket(remote.IP, localCIDLength, common.verbose)
	if err != nil {
		return err
	}
	conn, err := dtls.ClientWithOptions(socket, remote, clientOptions...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("handshake with %s: %w", remote, err)
	}
	ids, err := handshakeLine("client", conn, common.suite)
	if err != nil {
		return err
	}
	socket.outgoingCIDLength.Store(int64(len(ids.RemoteConnectionID)))

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
	sent := 0
	for lines.Scan() {
		if *moveAfter > 0 && sent == *moveAfter {
			from, to, err := socket.move()
			if err != nil {
				return fmt.Errorf("move to a new port: %w", err)
			}
			fmt.Fprintf(os.Stderr, "pion-peer client: moved from %s to %s\n", from, to)
		}
		if _, err := conn.Write([]byte(lines.Text() + "\n")); err != nil {
			return fmt.Errorf("send: %w", err)
		}
		sent++
	}
	time.Sleep(*linger)
	closeErr := conn.Close()
	<-replies
	fmt.Fprintf(os.Stderr, "pion-peer client: %s\n", socket.counts())
	if closeErr != nil && !strings.Contains(closeErr.Error(), "closed") {
		return closeErr
	}
	return nil
}

// movableSocket is the client's net.PacketConn: a UDP socket that can be swapped for a new one on
// another local port in the middle of a session (pion never learns of it), and that counts the
// records going each way by content type.
type movableSocket struct {
	mu            sync.Mutex
	current       *net.UDPConn
	localIP       net.IP
	readDeadline  time.Time
	writeDeadline time.Time
	closed        bool

	incomingCIDLength int          // fixed by our own CID
	outgoingCIDLength atomic.Int64 // known once the handshake is done; -1 before
	verbose           bool

	sentCID, sentOther, receivedCID, receivedOther, moves atomic.Int64
}

func newMovableSocket(towards net.IP, incomingCIDLength int, verbose bool) (*movableSocket, error) {
	localIP := net.IPv4(127, 0, 0, 1)
	if towards.To4() == nil {
		localIP = net.IPv6loopback
	}
	if !towards.IsLoopback() {
		localIP = nil
	}
	socket, err := net.ListenUDP("udp", &net.UDPAddr{IP: localIP})
	if err != nil {
		return nil, err
	}
	m := &movableSocket{current: socket, localIP: localIP, incomingCIDLength: incomingCIDLength, verbose: verbose}
	m.outgoingCIDLength.Store(-1)
	return m, nil
}

// move binds a new socket, makes it the one every read and write uses, and closes the old one
// (which ends a read blocked on it; ReadFrom then goes on with the new one).
func (m *movableSocket) move() (net.Addr, net.Addr, error) {
	fresh, err := net.ListenUDP("udp", &net.UDPAddr{IP: m.localIP})
	if err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	old := m.current
	m.current = fresh
	_ = fresh.SetReadDeadline(m.readDeadline)
	_ = fresh.SetWriteDeadline(m.writeDeadline)
	m.mu.Unlock()
	m.moves.Add(1)
	from := old.LocalAddr()
	_ = old.Close()
	return from, fresh.LocalAddr(), nil
}

func (m *movableSocket) socket() (*net.UDPConn, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.current, m.closed
}

func (m *movableSocket) ReadFrom(buffer []byte) (int, net.Addr, error) {
	for {
		socket, closed := m.socket()
		if closed {
			return 0, nil, net.ErrClosed
		}
		n, from, err := socket.ReadFrom(buffer)
		if err != nil {
			if now, closed := m.socket(); now != socket && !closed {
				continue // moved while this read waited on the old socket
			}
			return n, from, err
		}
		m.count(buffer[:n], false)
		return n, from, nil
	}
}

func (m *movableSocket) WriteTo(datagram []byte, to net.Addr) (int, error) {
	socket, _ := m.socket()
	m.count(datagram, true)
	return socket.WriteTo(datagram, to)
}

func (m *movableSocket) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return m.current.Close()
}

func (m *movableSocket) LocalAddr() net.Addr {
	socket, _ := m.socket()
	return socket.LocalAddr()
}

func (m *movableSocket) SetDeadline(t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readDeadline, m.writeDeadline = t, t
	return m.current.SetDeadline(t)
}

func (m *movableSocket) SetReadDeadline(t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readDeadline = t
	return m.current.SetReadDeadline(t)
}

func (m *movableSocket) SetWriteDeadline(t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writeDeadline = t
	return m.current.SetWriteDeadline(t)
}

// count walks the records of a datagram and counts the encrypted ones (epoch > 0) by whether they
// are tls12_cid records. A tls12_cid record whose CID length is not known yet (our Finished, before
// the handshake line) is counted and ends the walk.
func (m *movableSocket) count(datagram []byte, outgoing bool) {
	cidLength := m.incomingCIDLength
	if outgoing {
		cidLength = int(m.outgoingCIDLength.Load())
	}
	var names []string
	rest := datagram
	for len(rest) >= 13 {
		contentType := rest[0]
		epoch := int(rest[3])<<8 | int(rest[4])
		headerLength := 13
		if contentType == contentTypeCID {
			if cidLength < 0 {
				m.tally(true, outgoing)
				names = append(names, "tls12_cid (CID length not known yet)")
				break
			}
			headerLength = 11 + cidLength + 2
			if len(rest) < headerLength {
				break
			}
		}
		bodyLength := int(rest[headerLength-2])<<8 | int(rest[headerLength-1])
		if epoch > 0 {
			m.tally(contentType == contentTypeCID, outgoing)
		}
		names = append(names, fmt.Sprintf("type %d epoch %d (%d B)", contentType, epoch, bodyLength))
		if len(rest) < headerLength+bodyLength {
			break
		}
		rest = rest[headerLength+bodyLength:]
	}
	if m.verbose {
		arrow := "<-"
		if outgoing {
			arrow = "->"
		}
		fmt.Fprintf(os.Stderr, "pion-peer client: %s %d B: %s\n", arrow, len(datagram), strings.Join(names, ", "))
	}
}

func (m *movableSocket) tally(isCID, outgoing bool) {
	switch {
	case outgoing && isCID:
		m.sentCID.Add(1)
	case outgoing:
		m.sentOther.Add(1)
	case isCID:
		m.receivedCID.Add(1)
	default:
		m.receivedOther.Add(1)
	}
}

func (m *movableSocket) counts() string {
	return fmt.Sprintf("encrypted records sent: %d tls12_cid, %d plain; received: %d tls12_cid, %d plain; "+
		"local port changes: %d", m.sentCID.Load(), m.sentOther.Load(), m.receivedCID.Load(),
		m.receivedOther.Load(), m.moves.Load())
}

var _ net.PacketConn = (*movableSocket)(nil)
var _ io.Closer = (*movableSocket)(nil)

// runConcurrentServer serves many clients at once, as a load generator needs: an accept loop and a
// goroutine per connection that completes the handshake and echoes every record, quietly (one
// line per failed handshake, counts on exit). It runs until --time-limit or until killed.
func runConcurrentServer(args []string) error {
	_, listener, err := startServer("server-concurrent", args, nil)
	if err != nil {
		return err
	}
	defer listener.Close()

	var completed, failed atomic.Int64
	for {
		accepted, err := listener.Accept()
		if err != nil {
			fmt.Fprintf(os.Stderr, "pion-peer server-concurrent: %d handshake(s) completed, %d failed\n",
				completed.Load(), failed.Load())
			return err
		}
		conn, ok := accepted.(*dtls.Conn)
		if !ok {
			accepted.Close()
			continue
		}
		go func() {
			if err := echoConcurrentSession(conn); err != nil {
				failed.Add(1)
				fmt.Fprintf(os.Stderr, "pion-peer server-concurrent: %s: %v\n", conn.RemoteAddr(), err)
				return
			}
			if n := completed.Add(1); n%1000 == 0 {
				fmt.Fprintf(os.Stderr, "pion-peer server-concurrent: %d handshake(s) completed\n", n)
			}
		}()
	}
}

// echoConcurrentSession completes one handshake and echoes records until the client closes.
func echoConcurrentSession(conn *dtls.Conn) error {
	defer conn.Close()
	if err := acceptHandshake(conn); err != nil {
		return err
	}
	buffer := make([]byte, 1<<14)
	for {
		// An idle client is dropped: a load run must not pile up sessions.
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := conn.Read(buffer)
		if err != nil {
			return nil
		}
		if _, err := conn.Write(buffer[:n]); err != nil {
			return nil
		}
	}
}

// listenDTLS opens the DTLS listener both server modes share (credentials, CIDs when asked) and
// says where it listens, which the tests wait for.
func listenDTLS(mode string, common *commonFlags, certs *certificateFlags, listen string) (net.Listener, error) {
	options, authOptions, err := credentials(common, certs, true)
	if err != nil {
		return nil, err
	}
	serverOptions := make([]dtls.ServerOption, 0, len(options)+len(authOptions)+1)
	for _, option := range options {
		serverOptions = append(serverOptions, option)
	}
	serverOptions = append(serverOptions, authOptions...)
	if common.cid {
		// pion's listener routes tls12_cid records to their session by this CID, whatever their source.
		serverOptions = append(serverOptions, dtls.WithConnectionIDGenerator(dtls.RandomCIDGenerator(serverCIDLength)))
	}
	address, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		return nil, err
	}
	listener, err := dtls.ListenWithOptions("udp", address, serverOptions...)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "pion-peer %s: listening on %s\n", mode, listener.Addr())
	return listener, nil
}
