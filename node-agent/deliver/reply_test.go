package deliver_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/munge/mungetest"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/deliver"
	"github.com/lachesis-sched/lachesis/profile"
)

// replying is a Client whose "controller" reads the report and answers
// with reply, whatever it is.
func replying(reply []byte) *deliver.Client {
	return &deliver.Client{
		Addr: "controller", Signer: &mungetest.Fake{}, Timeout: 2 * time.Second, MaxFrameBytes: 64 << 20,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			agent, ctl := net.Pipe()
			go func() {
				defer ctl.Close()
				if _, err := wire.ReadFrame(ctl, wire.MaxBodyBytes); err == nil {
					ctl.Write(reply)
				}
			}()
			return agent, nil
		},
	}
}

func ackFrame(body []byte) []byte {
	return append(wire.AppendHeader(nil, wire.TypeAck, 0, len(body)), body...)
}

func TestHostileRepliesAreRefusedAsUnreachable(t *testing.T) {
	deep := append(append([]byte{0x81, 0xa2, 'z', 'z'}, bytes.Repeat([]byte{0x91}, wire.MaxAckBytes-6)...), 0xc0)
	tests := []struct {
		name  string
		reply []byte
		want  error
	}{
		{"an ack nested to the largest ack is refused as too deep", ackFrame(deep), wire.ErrTooDeep},
		{"an ack map claiming 2^32-1 entries is refused as too many", ackFrame([]byte{0xdf, 0xff, 0xff, 0xff, 0xff}), wire.ErrTooMany},
		{"an ack claiming 64 MiB is refused unread", wire.AppendHeader(nil, wire.TypeAck, 0, 64<<20), wire.ErrTooLarge},
		{"a reply of another protocol version is refused", append([]byte("LCHS\x01\x03"), make([]byte, 6)...), wire.ErrVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := replying(tc.reply).Send(context.Background(), wire.TypeProfile, &wire.ProfileReport{Record: profile.Record{ID: "x"}})
			if !errors.Is(err, deliver.ErrUnreachable) || !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want ErrUnreachable and %v", err, tc.want)
			}
		})
	}
}

// FuzzReply: whatever answers on the controller's port, Send ends in an
// ack or an error, without panicking or decoding without limits. Big
// replies are built from a small seed: head + unit×n.
func FuzzReply(f *testing.F) {
	ok, _ := wire.Marshal(&wire.Ack{ID: "x", OK: true})
	f.Add(ackFrame(ok), []byte{}, uint32(0))
	f.Add(ackFrame(nil)[:wire.HeaderSize-4], []byte{0x91}, uint32(1<<20))
	f.Add(wire.AppendHeader(nil, wire.TypeAck, 0, 5), []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, uint32(1))
	f.Fuzz(func(t *testing.T, head, unit []byte, n uint32) {
		if len(unit) > 0 {
			n = min(n, uint32((wire.MaxAckBytes+64)/len(unit)))
		}
		reply := append(head, bytes.Repeat(unit, int(n))...)
		ack, err := replying(reply).Send(context.Background(), wire.TypeProfile, &wire.ProfileReport{Record: profile.Record{ID: "x"}})
		if err != nil && !errors.Is(err, deliver.ErrUnreachable) && !errors.Is(err, deliver.ErrRefused) {
			t.Fatalf("error is neither unreachable nor refused: %v", err)
		}
		if err == nil && !ack.OK {
			t.Fatalf("a negative ack passed as delivered: %+v", ack)
		}
	})
}
