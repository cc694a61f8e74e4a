// Command pion-sctp-peer is an SCTP peer built on pion/sctp (the SCTP stack of pion/webrtc), the
// independent implementation fastshake's SCTP interop tests run against. SCTP travels over UDP,
// the common header straight in the UDP payload (RFC 6951); pion/sctp takes any net.Conn, so the
// client uses a connected UDP socket and the server a socket bound to the peer it first hears from.
// pion/sctp uses SCTP port 5000 on both ends when it initiates.
//
//	pion-sctp-peer server --listen 127.0.0.1:0 [--echo] [--time-limit 30s] [-v]
//	pion-sctp-peer client --connect HOST:PORT [--time-limit 30s] [-v]
//
// The server accepts one association, prints every message it receives on stdout (and sends it
// back with --echo) and exits when the association ends. The client sends each line of its
// standard input as one message on stream 0, prints what comes back, and after the end of its
// input and the last echo shuts the association down gracefully.
//
// Both print on stderr "handshake done: ..." once the association is up, and before exiting two
// lines counting the SCTP chunks they sent and received on the wire, by type ("wire out: INIT 1,
// ..."), with "DATA resent", the DATA chunks whose TSN had been sent before: a peer that had to
// retransmit anything on loopback shows it there.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
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

	"github.com/pion/logging"
	"github.com/pion/sctp"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = server(os.Args[2:])
	case "client":
		err = client(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pion-sctp-peer: %v\n", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: pion-sctp-peer server --listen ADDR [--echo] | client --connect ADDR")
	os.Exit(64)
}

// common holds the flags both roles take.
type common struct {
	timeLimit time.Duration
	verbose   bool
}

func (c *common) register(set *flag.FlagSet) {
	set.DurationVar(&c.timeLimit, "time-limit", 30*time.Second, "exit with status 2 after this long, whatever happens")
	set.BoolVar(&c.verbose, "v", false, "pion's debug log and one line per packet on stderr")
}

// start arms the time limit and returns pion's logger factory.
func (c *common) start() logging.LoggerFactory {
	limit := c.timeLimit
	time.AfterFunc(limit, func() {
		fmt.Fprintf(os.Stderr, "pion-sctp-peer: time limit of %v reached\n", limit)
		os.Exit(2)
	})
	factory := logging.NewDefaultLoggerFactory()
	factory.DefaultLogLevel = logging.LogLevelError
	if c.verbose {
		factory.DefaultLogLevel = logging.LogLevelDebug
	}
	return factory
}

// Chunk types counted on the wire, in the order they are printed (RFC 9260 §3.2).
var chunkNames = []struct {
	kind byte
	name string
}{
	{1, "INIT"}, {2, "INIT-ACK"}, {10, "COOKIE-ECHO"}, {11, "COOKIE-ACK"}, {0, "DATA"}, {3, "SACK"},
	{4, "HEARTBEAT"}, {5, "HEARTBEAT-ACK"}, {7, "SHUTDOWN"}, {8, "SHUTDOWN-ACK"}, {14, "SHUTDOWN-COMPLETE"},
	{6, "ABORT"}, {9, "ERROR"},
}

// wireCount counts the chunks of the SCTP packets going one way.
type wireCount struct {
	mu      sync.Mutex
	byType  map[byte]int
	tsns    map[uint32]bool
	resent  int
	packets int
	label   string
	verbose bool
}

func newWireCount(label string, verbose bool) *wireCount {
	return &wireCount{byType: map[byte]int{}, tsns: map[uint32]bool{}, label: label, verbose: verbose}
}

// add walks the chunks of one packet: 12-byte common header, then type, flags, 16-bit length,
// value, padded to 4 bytes.
func (w *wireCount) add(packet []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.packets++
	var kinds []string
	for off := 12; off+4 <= len(packet); {
		kind := packet[off]
		length := int(binary.BigEndian.Uint16(packet[off+2:]))
		if length < 4 || off+length > len(packet) {
			break
		}
		w.byType[kind]++
		kinds = append(kinds, fmt.Sprint(kind))
		if kind == 0 && length >= 16 {
			tsn := binary.BigEndian.Uint32(packet[off+4:])
			if w.tsns[tsn] {
				w.resent++
			}
			w.tsns[tsn] = true
		}
		off += (length + 3) &^ 3
	}
	if w.verbose {
		fmt.Fprintf(os.Stderr, "%s %d bytes, chunk types %s\n", w.label, len(packet), strings.Join(kinds, " "))
	}
}

func (w *wireCount) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	parts := make([]string, 0, len(chunkNames)+1)
	for _, c := range chunkNames {
		parts = append(parts, fmt.Sprintf("%s %d", c.name, w.byType[c.kind]))
		if c.kind == 0 {
			parts = append(parts, fmt.Sprintf("DATA resent %d", w.resent))
		}
	}
	return fmt.Sprintf("%s: %s", w.label, strings.Join(parts, ", "))
}

// countedConn passes packets through and counts them both ways.
type countedConn struct {
	net.Conn
	out, in *wireCount
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.in.add(b[:n])
	}
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	c.out.add(b)
	return c.Conn.Write(b)
}

// peerConn is an unconnected UDP socket seen as a connection to the one peer it first heard from;
// that first datagram is handed out by the first Read. Datagrams from anyone else are dropped.
type peerConn struct {
	*net.UDPConn
	peer  *net.UDPAddr
	first []byte
}

func (c *peerConn) Read(b []byte) (int, error) {
	if c.first != nil {
		n := copy(b, c.first)
		c.first = nil
		return n, nil
	}
	for {
		n, from, err := c.UDPConn.ReadFromUDP(b)
		if err != nil {
			return n, err
		}
		if from.IP.Equal(c.peer.IP) && from.Port == c.peer.Port {
			return n, nil
		}
	}
}

func (c *peerConn) Write(b []byte) (int, error) {
	return c.UDPConn.WriteToUDP(b, c.peer)
}

func (c *peerConn) RemoteAddr() net.Addr {
	return c.peer
}

// tally counts the user messages one side sent and received.
type tally struct {
	messagesIn, bytesIn, messagesOut, bytesOut atomic.Int64
}

func (t *tally) String() string {
	return fmt.Sprintf("%d byte(s) in %d message(s) received, %d byte(s) in %d message(s) sent",
		t.bytesIn.Load(), t.messagesIn.Load(), t.bytesOut.Load(), t.messagesOut.Load())
}

func server(args []string) error {
	set := flag.NewFlagSet("server", flag.ExitOnError)
	var c common
	c.register(set)
	listen := set.String("listen", "127.0.0.1:0", "UDP address to listen on")
	echo := set.Bool("echo", false, "send every message back on its stream")
	if err := set.Parse(args); err != nil {
		return err
	}
	loggers := c.start()
	addr, err := net.ResolveUDPAddr("udp", *listen)
	if err != nil {
		return err
	}
	udp, err := net.ListenUDP("udp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "pion-sctp-peer server: listening on %s\n", udp.LocalAddr())
	buf := make([]byte, 65536)
	n, peer, err := udp.ReadFromUDP(buf)
	if err != nil {
		return err
	}
	out, in := newWireCount("wire out", c.verbose), newWireCount("wire in", c.verbose)
	conn := &countedConn{Conn: &peerConn{UDPConn: udp, peer: peer, first: append([]byte(nil), buf[:n]...)}, out: out, in: in}
	assoc, err := sctp.ServerWithOptions(sctp.WithNetConn(conn), sctp.WithLoggerFactory(loggers), sctp.WithName("server"))
	if err != nil {
		return fmt.Errorf("handshake with %s: %w", peer, err)
	}
	fmt.Fprintf(os.Stderr, "pion-sctp-peer server: handshake done: association with %s\n", peer)
	var t tally
	var wg sync.WaitGroup
	var stdout sync.Mutex
	for {
		stream, err := assoc.AcceptStream()
		if err != nil {
			break // the association is gone
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := make([]byte, 65536)
			for {
				n, ppi, err := stream.ReadSCTP(msg)
				if err != nil {
					return
				}
				t.messagesIn.Add(1)
				t.bytesIn.Add(int64(n))
				stdout.Lock()
				_, _ = os.Stdout.Write(msg[:n])
				stdout.Unlock()
				if *echo {
					if _, err := stream.WriteSCTP(msg[:n], ppi); err != nil {
						fmt.Fprintf(os.Stderr, "pion-sctp-peer server: echo: %v\n", err)
						return
					}
					t.messagesOut.Add(1)
					t.bytesOut.Add(int64(n))
				}
			}
		}()
	}
	wg.Wait()
	_ = assoc.Close()
	fmt.Fprintln(os.Stderr, out)
	fmt.Fprintln(os.Stderr, in)
	fmt.Fprintf(os.Stderr, "pion-sctp-peer server: association ended; %s\n", &t)
	return nil
}

func client(args []string) error {
	set := flag.NewFlagSet("client", flag.ExitOnError)
	var c common
	c.register(set)
	connect := set.String("connect", "", "the server's UDP address")
	if err := set.Parse(args); err != nil {
		return err
	}
	if *connect == "" {
		return errors.New("--connect is required")
	}
	loggers := c.start()
	raddr, err := net.ResolveUDPAddr("udp", *connect)
	if err != nil {
		return err
	}
	udp, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return err
	}
	out, in := newWireCount("wire out", c.verbose), newWireCount("wire in", c.verbose)
	conn := &countedConn{Conn: udp, out: out, in: in}
	assoc, err := sctp.ClientWithOptions(sctp.WithNetConn(conn), sctp.WithLoggerFactory(loggers), sctp.WithName("client"))
	if err != nil {
		return fmt.Errorf("handshake with %s: %w", raddr, err)
	}
	fmt.Fprintf(os.Stderr, "pion-sctp-peer client: handshake done: association with %s from %s\n", raddr, udp.LocalAddr())
	stream, err := assoc.OpenStream(0, sctp.PayloadTypeWebRTCBinary)
	if err != nil {
		return err
	}
	var t tally
	received := make(chan struct{}, 1)
	go func() {
		msg := make([]byte, 65536)
		for {
			n, _, err := stream.ReadSCTP(msg)
			if err != nil {
				return
			}
			t.messagesIn.Add(1)
			t.bytesIn.Add(int64(n))
			_, _ = os.Stdout.Write(msg[:n])
			select {
			case received <- struct{}{}:
			default:
			}
		}
	}()
	lines := bufio.NewReader(os.Stdin)
	for {
		line, err := lines.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := stream.WriteSCTP(line, sctp.PayloadTypeWebRTCBinary); werr != nil {
				return fmt.Errorf("sending: %w", werr)
			}
			t.messagesOut.Add(1)
			t.bytesOut.Add(int64(len(line)))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	// Every byte sent comes back from an echo server: wait for the last of it.
	for t.bytesIn.Load() < t.bytesOut.Load() {
		<-received
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := assoc.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	_ = assoc.Close()
	fmt.Fprintln(os.Stderr, out)
	fmt.Fprintln(os.Stderr, in)
	fmt.Fprintf(os.Stderr, "pion-sctp-peer client: closed gracefully; %s\n", &t)
	return nil
}
